"""The spliced render (templates/skeletons.py) writes exactly what the full Jinja render writes, for
every template, locale and part, whatever the secret and the other variables contain; a template
that uses the secret any other way than a bare top-level `{{ name }}` is never spliced. The fast
SMS count agrees with the per-character one."""

from __future__ import annotations

import jinja2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from signup_verification.delivery import sms, templates
from signup_verification.delivery.templates import skeletons

ALL_PARTS = [
    (f"{purpose}/{version}", locale, part, secret_name)
    for purpose in templates.purposes()
    for version in templates.versions(purpose)
    for locale in templates.locales(f"{purpose}/{version}")
    for part, secret_name in (("subject", "link"), ("text", "link"), ("html", "link"), ("sms", "code"))
]
NASTY = ["", "&", "<b>\"x\"</b> & 'y'", "https://a.example/v?x=1&token=AbC-_d", "™ é 😀", "{{ link }}", "%s"]


@pytest.mark.parametrize(("version_ref", "locale", "part", "secret_name"), ALL_PARTS)
@pytest.mark.parametrize("product", ["Example", "A&B <Co> \"q\" 'x'", "Exämple™"])
@pytest.mark.parametrize("minutes", [1, 2, 59, 1440])
def test_spliced_render_equals_the_full_render(version_ref, locale, part, secret_name, product, minutes):
    for secret in NASTY:
        full = templates.render(version_ref, locale, part, product=product, minutes=minutes, **{secret_name: secret})
        fast = templates.render_secret(version_ref, locale, part, secret_name, secret, product=product, minutes=minutes)
        assert fast == full and type(fast) is type(full)


@pytest.mark.parametrize(("version_ref", "locale", "part", "secret_name"), ALL_PARTS)
def test_every_shipped_part_takes_the_spliced_path(version_ref, locale, part, secret_name):
    """Not a silent fallback: the pieces exist for each shipped part (else the speed-up is gone)."""
    source = getattr(templates.load(version_ref, locale), part)
    assert skeletons.secret_slots(templates._env(part), source, secret_name) is not None


@settings(max_examples=200, deadline=None)
@given(secret=st.text(), product=st.text(), minutes=st.integers(min_value=1, max_value=10_000))
def test_spliced_render_equals_the_full_render_for_any_text(secret, product, minutes):
    for version_ref, locale, part, secret_name in ALL_PARTS:
        full = templates.render(version_ref, locale, part, product=product, minutes=minutes, **{secret_name: secret})
        fast = templates.render_secret(version_ref, locale, part, secret_name, secret, product=product, minutes=minutes)
        assert fast == full


ENV = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)


@pytest.mark.parametrize(
    "source",
    [
        "{{ link|upper }}",  # a filter sees it
        "{{ link[:5] }}",
        "{% if link %}x{% endif %}",  # a condition reads it
        "{% for c in link %}{{ c }}{% endfor %}",
        "{% if a %}{{ link }}{% endif %}",  # not at the top level
        "{% autoescape false %}{{ link }}{% endautoescape %}",  # another escaping scope
        "{% filter upper %}{{ link }}{% endfilter %}",
        "{% set link = 'x' %}{{ link }}",
        "{% block b %}{{ link }}{% endblock %}",
        "{{ link ~ '!' }}",
        "{{ plural(link, one='a', other='b') }}",
    ],
)
def test_a_secret_used_any_other_way_is_never_spliced(source):
    assert skeletons.secret_slots(ENV, source, "link") is None


@pytest.mark.parametrize(
    ("source", "slots"),
    [("no secret {{ product }}", 0), ("<a href='{{ link }}'>{{ link }}</a> {{ product }}", 2), ("{{ link }}", 1)],
)
def test_bare_top_level_uses_are_counted(source, slots):
    assert skeletons.secret_slots(ENV, source, "link") == slots


def test_a_marker_found_in_the_static_text_is_not_spliced():
    assert skeletons.split(f"a{skeletons.MARKER}b{skeletons.MARKER}c", 1) is None
    assert skeletons.split(f"a{skeletons.MARKER}b", 1) == ("a", "b")


def test_render_errors_still_come_from_the_full_render():
    with pytest.raises(jinja2.UndefinedError):
        templates.render_secret("signup/v1", "en", "text", "link", "x", product="P")  # minutes missing
    with pytest.raises(templates.UnknownTemplate):
        templates.render_secret("signup/v1", "xx", "text", "link", "x", product="P", minutes=1)


def _reference_info(text: str) -> tuple[str, int, int]:
    gsm = all(ch in sms.GSM7_BASIC or ch in sms.GSM7_EXTENSION for ch in text)
    costs = sms._unit_costs(text, gsm)
    single, part = (sms.GSM7_SINGLE, sms.GSM7_PART) if gsm else (sms.UCS2_SINGLE, sms.UCS2_PART)
    return ("GSM-7" if gsm else "UCS-2", sum(costs), sms._segments(costs, single, part))


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from(sorted(sms.GSM7_ALL) + ["あ", "😀", "\ud800", "™"]), max_size=400))
def test_fast_sms_count_equals_the_per_character_count(text):
    info = sms.encode_info(text)
    assert (info.name, info.units, info.segments) == _reference_info(text)
