"""The one loader: any config dataclass from an environment, by its fields' declarations
(platform/settings.py), each variable resolved and parsed once, and every bad one collected
rather than stopping at the first (`raise_problems` raises them together)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from ..platform import secret_manager
from ..platform.config import ENVIRONMENT, FUNCTION_TARGET, Target
from ..platform.errors import ConfigError
from ..platform.settings import EACH, PART, SETTING, VIEW, WHEN, Setting

T = TypeVar("T")
C = TypeVar("C")


class Reading:
    """One reading of an environment (the `Env` the declarations' rules see): each variable's value
    once, each config class built once (every field that names it shares the instance), the problems."""

    def __init__(self, env: Mapping[str, str]):
        self._env = env
        self._texts: dict[str, str | None] = {}
        self._values: dict[str, Any] = {}
        self._built: dict[type, Any] = {}
        self.problems: list[str] = []

    @property
    def production(self) -> bool:
        return self(ENVIRONMENT) == "production"

    @property
    def target(self) -> Target | None:
        return self(FUNCTION_TARGET)

    def __call__(self, setting: Setting[T]) -> T:
        if setting.env not in self._values:
            self._values[setting.env] = self._read(setting)
        return self._values[setting.env]

    def is_set(self, setting: Setting[Any]) -> bool:
        return self._raw(setting) is not None

    def fail(self, problem: str) -> None:
        if problem not in self.problems:  # one variable read by several settings (an alias) fails once
            self.problems.append(problem)

    def build(self, cls: type[C]) -> C:
        """`cls` from its fields' declarations (a field without one keeps its dataclass default)."""
        if cls not in self._built:
            self._built[cls] = self._construct(cls, self._field_values(cls))
        return self._built[cls]

    def raise_problems(self) -> None:
        """One ConfigError naming every problem found ('.problems': one entry each), if any."""
        if len(self.problems) == 1:
            raise ConfigError(self.problems[0])
        if self.problems:
            raise ConfigError(
                f"{len(self.problems)} invalid settings: " + "; ".join(self.problems), tuple(self.problems)
            )

    # -- reading ---------------------------------------------------------------------------------
    def _text(self, name: str) -> str | None:
        """The variable's text, `sm://` references resolved (an unreadable one counts as unset: one
        problem, not a second for its value); None when unset or empty."""
        if name not in self._texts:
            value = self._env.get(name) or None
            if value is not None:
                try:
                    value = secret_manager.resolve(name, value) or None
                except ConfigError as exc:
                    self.problems.extend(exc.problems)
                    value = None
            self._texts[name] = value
        return self._texts[name]

    def _raw(self, setting: Setting[Any]) -> str | None:
        return self._source(setting)[1]

    def _source(self, setting: Setting[Any]) -> tuple[str, str | None]:
        """The variable that is set (the setting's own, else its first alias set) and its text."""
        for name in (setting.env, *setting.aliases):
            text = self._text(name)
            if text is not None:
                return name, text
        return setting.env, None

    def _read(self, setting: Setting[T]) -> T:
        name, raw = self._source(setting)
        if raw is None:
            if setting.required(self):
                self.fail(f"{setting.env} is required in production" + (f" ({setting.form})" if setting.form else ""))
            return setting.default_in(self)
        try:
            return setting.read(raw, self)
        except ConfigError as exc:  # its message names the variable
            for problem in exc.problems:
                self.fail(problem)
        except ValueError as exc:
            self.fail(f"{name} {exc}")
        return setting.default_in(self)

    # -- building --------------------------------------------------------------------------------
    def _construct(self, cls: type[C], values: dict[str, Any]) -> C:
        try:
            return cls(**values)
        except ConfigError as exc:  # a check across the class's own fields (its __post_init__)
            self.problems.extend(exc.problems)
            return cls()

    def _field_values(self, cls: type, key: str | None = None, defaults: Any = None) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            meta = f.metadata
            if SETTING in meta:
                setting = meta[SETTING] if key is None else meta[SETTING].keyed(key, getattr(defaults, f.name))
                if setting.when is None or setting.when(self):
                    view = meta[VIEW]
                    values[f.name] = self(setting) if view is None else view(self(setting))
            elif PART in meta:
                if WHEN not in meta or meta[WHEN](self):
                    values[f.name] = self.build(meta[PART])
            elif EACH in meta:
                nested, per_key = meta[EACH]
                values[f.name] = {
                    k: self._construct(nested, self._field_values(nested, k, d)) for k, d in per_key.items()
                }
        return values
