"""platform/settings.py and config/loader.py on a config of their own: each kind of declaration
reads its variable as documented, and every bad one is reported with the others."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pytest

from signup_verification.config.loader import Reading
from signup_verification.platform.config import ENVIRONMENT
from signup_verification.platform.errors import ConfigError
from signup_verification.platform.settings import Setting, each, part, plain, setting, settings_of, words

SHARED = Setting("TOY_SHARED", 3, minimum=1, help="read by two configs")


@dataclasses.dataclass(frozen=True)
class Leaf:
    count: int = SHARED.field()
    doubled: int = SHARED.field(view=lambda n: n * 2)


@dataclasses.dataclass(frozen=True)
class Limit:
    mode: str = setting("TOY_MODE_{key}", "off", choices=("off", "on"), help="{key}'s mode")


@dataclasses.dataclass(frozen=True)
class Toy:
    size: int = setting("TOY_SIZE", 10, minimum=1, maximum=100, help="a bounded integer")
    ratio: float = setting("TOY_RATIO", 0.5, above=0, help="a positive number")
    loud: bool = setting("TOY_LOUD", False, default_for=lambda env: env.production, help="a flag")
    name: str | None = setting("TOY_NAME", None, aliases=("OLD_TOY_NAME",), help="optional text")
    token: str | None = setting("TOY_TOKEN", None, secret=True, required_in_production={"status"}, help="a secret")
    tags: frozenset[str] = setting("TOY_TAGS", frozenset({"a"}), parse=words(upper=True), help="a comma list")
    coarse: bool = setting("TOY_ROUNDING", False, choices={"exact": False, "coarse": True}, help="a mapped word")
    keep_seconds: float = setting("TOY_KEEP_DAYS", 2 * 86400.0, unit=86400, minimum=0, help="days, kept in seconds")
    upper: str = setting("TOY_LEVEL", "INFO", parse=plain(str.upper), choices=("INFO", "DEBUG"), help="normalised")
    alert: float | None = setting(
        "TOY_ALERT", 60.0, when=lambda env: env(SHARED) > 5, otherwise=None, help="only with a large TOY_SHARED"
    )
    leaf: Leaf = part(Leaf)
    again: Leaf = part(Leaf)
    limits: Mapping[str, Limit] = each(Limit, {"email": Limit("on"), "sms": Limit()})
    fixed: int = 7  # not a setting: keeps its default


def read(env: dict[str, str]) -> tuple[Toy, list[str]]:
    reading = Reading(env)
    return reading.build(Toy), reading.problems


def test_defaults_are_the_dataclass_defaults():
    toy, problems = read({})
    assert problems == [] and toy == Toy()
    assert (toy.size, toy.loud, toy.name, toy.tags, toy.keep_seconds, toy.alert) == (
        10,
        False,
        None,
        {"a"},
        172800,
        None,
    )
    assert toy.limits == {"email": Limit("on"), "sms": Limit("off")} and toy.fixed == 7


def test_each_kind_reads_its_variable():
    toy, problems = read(
        {
            "TOY_SIZE": "42",
            "TOY_RATIO": "1.5",
            "TOY_LOUD": " Yes ",
            "OLD_TOY_NAME": "legacy",
            "TOY_TAGS": "x, y,,",
            "TOY_ROUNDING": "coarse",
            "TOY_KEEP_DAYS": "0.5",
            "TOY_LEVEL": "debug",
            "TOY_SHARED": "6",
            "TOY_MODE_SMS": "on",
        }
    )
    assert problems == []
    assert (toy.size, toy.ratio, toy.loud, toy.name, toy.tags) == (42, 1.5, True, "legacy", {"X", "Y"})
    assert (toy.coarse, toy.keep_seconds, toy.upper, toy.alert) == (True, 43200.0, "DEBUG", 60.0)
    assert (toy.leaf.count, toy.leaf.doubled) == (6, 12) and toy.again is toy.leaf  # one instance per class
    assert toy.limits["sms"].mode == "on" and toy.limits["email"].mode == "on"


def test_production_defaults_and_requirements():
    production = {"ENVIRONMENT": "production"}
    assert read(production)[0].loud is True  # default_for
    assert read(production)[1] == []  # TOY_TOKEN is required on the `status` target only
    _, problems = read({**production, "FUNCTION_TARGET": "status"})
    assert problems == ["TOY_TOKEN is required in production"]


def test_every_bad_value_is_reported_once_with_the_others():
    env = {
        "TOY_SIZE": "101",
        "TOY_RATIO": "0",
        "TOY_LOUD": "maybe",
        "TOY_TAGS": "",  # empty: unset, the default
        "TOY_ROUNDING": "vague",
        "TOY_KEEP_DAYS": "-1",
        "TOY_LEVEL": "loud",
        "TOY_SHARED": "zero",
        "TOY_MODE_EMAIL": "sideways",
    }
    toy, problems = read(env)
    assert problems == [
        "TOY_SIZE must be between 1 and 100, got 101",
        "TOY_RATIO must be > 0, got 0",
        "TOY_LOUD must be true or false, got 'maybe'",
        "TOY_ROUNDING must be one of exact, coarse, got 'vague'",
        "TOY_KEEP_DAYS must be >= 0, got -1",
        "TOY_LEVEL must be one of INFO, DEBUG, got 'loud'",
        "TOY_SHARED must be an integer, got 'zero'",  # read by three fields, reported once
        "TOY_MODE_EMAIL must be one of off, on, got 'sideways'",
    ]
    assert toy == Toy()  # each bad value falls back to its default
    with pytest.raises(ConfigError) as caught:
        reading = Reading(env)
        reading.build(Toy)
        reading.raise_problems()
    assert str(caught.value).startswith("8 invalid settings: TOY_SIZE") and caught.value.problems == tuple(problems)


def test_a_secret_stays_out_of_the_repr():
    toy, _ = read({"TOY_TOKEN": "s3cret-value"})
    assert toy.token == "s3cret-value" and "s3cret-value" not in repr(toy)


def test_the_declarations_are_listed_for_the_docs():
    names = [spec.env for _, spec in settings_of(Toy)]
    assert names[:3] == ["TOY_SIZE", "TOY_RATIO", "TOY_LOUD"] and names[-2:] == ["TOY_MODE_EMAIL", "TOY_MODE_SMS"]
    shown = {spec.env: spec.shown() for _, spec in settings_of(Toy)}
    assert shown["TOY_KEEP_DAYS"] == "`2`" and shown["TOY_ROUNDING"] == "`exact`" and shown["TOY_NAME"] == "unset"
    assert shown["TOY_TOKEN"] == "unset; production: **required** on `status`"
    assert shown["TOY_MODE_EMAIL"] == "`on`" and shown["TOY_TAGS"] == "`a`"


def test_declarations_that_cannot_be_read_safely_are_refused():
    with pytest.raises(TypeError, match="TOY_LIST"):
        Setting("TOY_LIST", (1, 2), help="no parser")
    with pytest.raises(TypeError, match="TOY_PIN"):  # its error would show the value
        Setting("TOY_PIN", 1234, secret=True, help="a number's error says what it got")
    assert ENVIRONMENT.read("production", Reading({})) == "production"
