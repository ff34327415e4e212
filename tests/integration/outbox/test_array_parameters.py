"""The array literals the transitions write themselves (instead of pg8000's per-element encoder)
reach PostgreSQL as exactly the values given, whatever the text holds; a claimed intent built
without its __init__ equals one built through it."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from signup_verification.outbox import transitions as t

NASTY = [None, "", "NULL", "null", '"', "\\", '\\"', "a,b", "{x}", " lead", "tab\there", "new\nline", "ü™😀", "'q'"]


def test_text_arrays_round_trip(db):
    [[back]] = db.run("SELECT CAST(:v AS text[])", v=t._text_array(NASTY))
    assert back == NASTY


def test_number_and_boolean_arrays_round_trip(db):
    [[ints, floats, bools, empty]] = db.run(
        "SELECT CAST(:i AS bigint[]), CAST(:f AS float8[]), CAST(:b AS boolean[]), CAST(:e AS bigint[])",
        i=t._array([1, None, -5, 2**62]),
        f=t._array([0.0, 1e-05, 123.456, 86400.0, None]),
        b=t._array([True, False, None]),
        e=t._array([]),
    )
    assert (ints, floats, bools, empty) == (
        [1, None, -5, 2**62],
        [0.0, 1e-05, 123.456, 86400.0, None],
        [True, False, None],
        [],
    )


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.none() | st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"))))
def test_any_text_round_trips(db, values):
    [[back]] = db.run("SELECT CAST(:v AS text[])", v=t._text_array(values))
    assert back == values
