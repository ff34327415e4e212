"""One declaration per setting, on the config dataclass field it fills.

    send_timeout_seconds: float = setting(
        "SEND_TIMEOUT_SECONDS", 10.0, above=0, help="per provider call (connect + answer)"
    )

The field's metadata holds everything about its variable: the name, the default (also the
dataclass's own default), the bounds, how a value is parsed and the help text README.md's tables
show (tools/generate_docs.py). config/loader.py reads any config dataclass from these declarations.
A setting that several configs read is a module constant, each use one `.field()` (the loader reads
it once; `view` derives the field's value from the setting's):

    SEND_TIMEOUT = Setting("SEND_TIMEOUT_SECONDS", 10.0, above=0, help="...")
    timeout: float = SEND_TIMEOUT.field()

How a value is read: unset or empty is the default (`default_for` computes one that depends on the
environment). Otherwise `parse` (by default from the default's type: int, float, a bool flag, text),
then `choices`, then the bounds, then `unit`. A parser raises ValueError ("must be ...": the loader
puts the variable's name first) or ConfigError (its message names the variable). A parser, like
`default_for` and `when`, gets the `Env` being read: production or not, the target, other settings.

Other fields: `part(Cls)` is a nested config, read the same way (one instance per load, shared by
every field that names the class); `each(Cls, defaults)` one nested config per key, whose variables
carry the key (`AMBIGUOUS_POLICY_{key}` -> `AMBIGUOUS_POLICY_EMAIL`); a field with none of these
keeps its dataclass default. Every layer may import this module: it imports nothing of the package.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")
SETTING, VIEW, PART, WHEN, EACH = "setting", "view", "part", "when", "each"  # field metadata keys
_TRUE, _FALSE = frozenset({"1", "true", "yes", "on"}), frozenset({"0", "false", "no", "off"})


class Env(Protocol):
    """What a parser, `default_for` and `when` see of the configuration being read."""

    @property
    def production(self) -> bool: ...

    @property
    def target(self) -> str | None: ...

    def __call__(self, setting: Setting[T]) -> T:
        """Another setting's value (read once per load)."""
        ...


Parse = Callable[[str, Env], Any]


@dataclasses.dataclass(frozen=True, eq=False)
class Setting(Generic[T]):
    env: str  # the variable
    default: T  # in the field's unit
    help: str  # the README table's "meaning"
    parse: Parse | None = None  # None: by the default's type
    minimum: float | None = None  # >=
    above: float | None = None  # >
    maximum: float | None = None  # <=
    choices: Sequence[str] | Mapping[str, Any] | None = None  # a Mapping also maps each word to its value
    secret: bool = False  # never in a repr, never in an error (its parser must not echo it either)
    unit: float | None = None  # the variable counts this many of the field's units (days: 86400 seconds)
    aliases: tuple[str, ...] = ()  # read, in order, when `env` is unset
    default_for: Callable[[Env], T] | None = None  # a default that depends on the environment
    required_in_production: bool | Collection[str] = False  # True, or the targets that need it
    form: str = ""  # what a value looks like: named when a required one is missing
    when: Callable[[Env], bool] | None = None  # where it applies; elsewhere the field is `otherwise`
    otherwise: Any = None
    shown_default: str | None = None  # the README's default, where the value alone does not say it

    def __post_init__(self) -> None:
        if self.parse is None and self.choices is None and not isinstance(self.default, _BUILT_IN_TYPES):
            raise TypeError(f"{self.env}: a default of type {type(self.default).__name__} needs a parser")
        checked = self.choices is not None or (self.minimum, self.above, self.maximum) != (None, None, None)
        if self.secret and (checked or (self.parse is None and not isinstance(self.default, str | None))):
            raise TypeError(f"{self.env}: a secret is text or has a parser of its own (an error never shows it)")

    def field(self, view: Callable[[Any], Any] | None = None) -> Any:
        """A dataclass field filled from this setting; `view` derives the field's value from it."""
        default = self.otherwise if self.when is not None else self.default
        return dataclasses.field(
            default=default if view is None else view(default),
            repr=not self.secret,
            metadata={SETTING: self, VIEW: view},
        )

    def keyed(self, key: str, default: Any) -> Setting[Any]:
        """This setting for one key of an `each` field: `{key}` in its name and help filled in."""
        return dataclasses.replace(
            self, env=self.env.format(key=key.upper()), help=self.help.format(key=key), default=default
        )

    def required(self, env: Env) -> bool:
        wanted = self.required_in_production
        if not wanted or not env.production:
            return False
        return wanted is True or (isinstance(wanted, Collection) and env.target in wanted)

    def default_in(self, env: Env) -> T:
        return self.default if self.default_for is None else self.default_for(env)

    def read(self, raw: str, env: Env) -> T:
        """The value of the variable set to `raw`; ValueError ('must be ...') or ConfigError if it is not one."""
        value = (self.parse or _built_in(self))(raw, env)
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"must be one of {', '.join(self.choices)}, got {raw!r}")
        if isinstance(self.choices, Mapping):
            return self.choices[value]
        if isinstance(value, int | float) and not isinstance(value, bool):
            self._check_bounds(value, raw)
            if self.unit is not None:
                value = value * self.unit
        return value

    def _check_bounds(self, value: float, raw: str) -> None:
        low, high, above = self.minimum, self.maximum, self.above
        if low is not None and high is not None and not low <= value <= high:
            raise ValueError(f"must be between {low:g} and {high:g}, got {raw}")
        if low is not None and value < low:
            raise ValueError(f"must be >= {low:g}, got {raw}")
        if above is not None and value <= above:
            raise ValueError(f"must be > {above:g}, got {raw}")
        if high is not None and value > high:
            raise ValueError(f"must be <= {high:g}, got {raw}")

    def shown(self) -> str:
        """The README table's default column."""
        text = self.shown_default if self.shown_default is not None else _shown_value(self)
        wanted = self.required_in_production
        if wanted:
            where = "" if wanted is True else " on " + ", ".join(f"`{t}`" for t in sorted(wanted))
            text += f"; production: **required**{where}"
        return text


def setting(env: str, default: Any, *, help: str, **options: Any) -> Any:
    """A field read from one variable: `Setting(env, default, help, **options).field()`."""
    return Setting(env, default, help, **options).field()


def part(cls: type, *, when: Callable[[Env], bool] | None = None) -> Any:
    """A nested config read with the rest; with `when`, None where it does not apply."""
    if when is None:
        return dataclasses.field(default_factory=cls, metadata={PART: cls})
    return dataclasses.field(default=None, metadata={PART: cls, WHEN: when})


def each(cls: type, defaults: Mapping[str, Any]) -> Any:
    """{key: cls} read per key: `defaults[key]` holds that key's defaults."""
    return dataclasses.field(default_factory=lambda: dict(defaults), metadata={EACH: (cls, defaults)})


def settings_of(cls: type) -> Iterator[tuple[dataclasses.Field[Any], Setting[Any]]]:
    """(field, setting) of every field of `cls` read from a variable, `each` fields per key."""
    for f in dataclasses.fields(cls):
        if SETTING in f.metadata:
            yield f, f.metadata[SETTING]
        elif EACH in f.metadata:
            nested, defaults = f.metadata[EACH]
            for key, instance in defaults.items():
                for sub, spec in settings_of(nested):
                    yield sub, spec.keyed(key, getattr(instance, sub.name))


# -- parsers ---------------------------------------------------------------------------------------
def plain(parse: Callable[[str], T]) -> Parse:
    """A parser of the text alone."""
    return lambda raw, env: parse(raw)


def integer(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"must be an integer, got {raw!r}") from None


def number(raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"must be a number, got {raw!r}") from None


def flag(raw: str) -> bool:
    word = raw.strip().lower()
    if word in _TRUE or word in _FALSE:
        return word in _TRUE
    raise ValueError(f"must be true or false, got {word!r}")


def words(*, upper: bool = False) -> Parse:
    """'a, b' -> frozenset({'a', 'b'}), case-normalised, blanks dropped."""

    def parse(raw: str, env: Env) -> frozenset[str]:
        found = (w.strip() for w in raw.split(","))
        return frozenset(w.upper() if upper else w.lower() for w in found if w)

    return parse


def resolved_path(raw: str, env: Env) -> Path:
    return Path(raw).resolve()


_BUILT_IN_TYPES = (bool, int, float, str, type(None))


def _built_in(spec: Setting[Any]) -> Parse:
    if spec.choices is not None or spec.default is None or isinstance(spec.default, str):
        return lambda raw, env: raw
    if isinstance(spec.default, bool):
        return plain(flag)
    return plain(integer if isinstance(spec.default, int) else number)


def _shown_value(spec: Setting[Any]) -> str:
    value = spec.default
    if isinstance(spec.choices, Mapping):
        value = next(word for word, meant in spec.choices.items() if meant == value)
    if value is None or value == () or value == frozenset():
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int | float):
        value = value / spec.unit if spec.unit else value
        return f"`{int(value) if float(value).is_integer() else value}`"
    if isinstance(value, frozenset | tuple):
        items = sorted(value) if isinstance(value, frozenset) else value
        return f"`{','.join(_shown_item(v) for v in items)}`"
    return f"`{value}`"


def _shown_item(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
