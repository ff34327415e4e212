"""Versioned message templates per purpose and locale.

Layout: templates/<purpose>/<version>/<locale>.toml. The newest version of a purpose is recorded
on the intent at create time and used when it is sent, so a template change never alters a
message already promised, and an old row still says which content rules applied.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import jinja2

ROOT = Path(__file__).resolve().parent
DEFAULT_LOCALE = "en"


class UnknownTemplate(LookupError):
    pass


@dataclass(frozen=True)
class Template:
    purpose: str
    version: str
    locale: str
    subject: str
    text: str
    html: str
    sms: str
    sms_max_segments: int
    whatsapp: str = ""  # the text of the approved WhatsApp authentication template (Meta's, for this language)
    voice: str = ""  # what the call says, read by a speech engine in this language

    @property
    def version_ref(self) -> str:
        return f"{self.purpose}/{self.version}"


def purposes() -> list[str]:
    return sorted(p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith("_"))


@cache
def versions(purpose: str) -> list[str]:
    folder = ROOT / purpose
    if not folder.is_dir():
        raise UnknownTemplate(f"unknown template {purpose!r}")
    return sorted((p.name for p in folder.iterdir() if p.is_dir()), key=lambda v: int(v.lstrip("v")))


def current_version(purpose: str) -> str:
    """The version ref ('signup/v1') a new intent records."""
    return f"{purpose}/{versions(purpose)[-1]}"


@cache
def locales(version_ref: str) -> tuple[str, ...]:
    purpose, version = _split(version_ref)
    return tuple(sorted(p.stem for p in (ROOT / purpose / version).glob("*.toml")))


def resolve_locale(version_ref: str, requested: str | None) -> str:
    """Exact locale, else its language ('pt-BR' -> 'pt'), else English."""
    available = locales(version_ref)
    if requested:
        for candidate in (requested, requested.split("-")[0].lower()):
            if candidate in available:
                return candidate
    return DEFAULT_LOCALE


@cache
def load(version_ref: str, locale: str) -> Template:
    purpose, version = _split(version_ref)
    path = ROOT / purpose / version / f"{locale}.toml"
    if not path.exists():
        raise UnknownTemplate(f"no template {version_ref} for locale {locale!r}")
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return Template(
        purpose,
        version,
        locale,
        data["subject"].strip(),
        data["text"].strip() + "\n",
        data["html"].strip() + "\n",
        data["sms"].strip(),
        int(data.get("sms_max_segments", 1)),
        data.get("whatsapp", "").strip(),
        data.get("voice", "").strip(),
    )


def _split(version_ref: str) -> tuple[str, str]:
    purpose, sep, version = version_ref.partition("/")
    if not sep or "/" in version or ".." in version_ref:
        raise UnknownTemplate(f"bad template version {version_ref!r}")
    return purpose, version


# Text parts are plain text (no escaping); the HTML part is autoescaped.
_text_env = jinja2.Environment(
    autoescape=False, undefined=jinja2.StrictUndefined, keep_trailing_newline=True
)  # text/plain and SMS, never HTML  # nosec B701
_html_env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


def _env(part: str) -> jinja2.Environment:
    return _html_env if part == "html" else _text_env


@cache
def _compiled(version_ref: str, locale: str, part: str) -> jinja2.Template:
    return _env(part).from_string(getattr(load(version_ref, locale), part))


# CLDR plural categories for the counts our templates state (minutes), per language. A template
# says `{{ plural(minutes, one="minute", other="minutes") }}`; a locale without a rule refuses to render.
PLURAL_RULES = {
    "en": lambda n: "one" if n == 1 else "other",
    "ja": lambda n: "other",  # no grammatical plural
}


@cache
def plural_for(locale: str):
    rule = PLURAL_RULES.get(locale) or PLURAL_RULES.get(locale.split("-")[0].lower())
    if rule is None:
        raise UnknownTemplate(f"no plural rule for locale {locale!r} (templates/__init__.py PLURAL_RULES)")

    def plural(n: int, **forms: str) -> str:
        category = rule(n)
        return forms.get(category, forms["other"])

    return plural


def render(version_ref: str, locale: str, part: str, **variables: object) -> str:
    return _compiled(version_ref, locale, part).render(plural=plural_for(locale), **variables)
