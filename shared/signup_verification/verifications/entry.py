"""The hosted code-entry page (api/confirm.py: `?entry=<handle>`, the read API's `code_entry_url`):
one page per verification, for its person to type a code, whichever code step the code came by.

A verification has up to three steps, and each code step's secret proves its own number while its
message may have reached the person (confirm.py). The page speaks for all of them at once
(`entry_channel`): it asks for a code while one can prove, and otherwise says how the verification
ended for its person. Its form confirms through `confirm_code`, with the API's tries and budgets, and
answers what the page's GET shows whenever the code did not prove. The read API offers the page's URL
exactly while it asks for a code (verifications/read.py).
"""

from __future__ import annotations

from dataclasses import replace

from ..platform.catalogue import catalogue
from ..platform.database import Database
from .confirm import (
    FINISHED,
    INVALID,
    LOCKED,
    PENDING,
    WRONG_CODE,
    Outcome,
    confirm_code,
    from_state,
    logged,
)
from .proofs import presented_by
from .step_state import entry_channel
from .tokens import Keyring

_STATE = catalogue("verifications")["confirm_state"]


def preview_entry(db: Database, keyring: Keyring, handle: str | None) -> Outcome:
    """What the code-entry page shows (GET): its form while it asks for a code (`entry_channel` says
    which step's), else how the verification ended for its person. A handle no key of the ring made
    costs no query. Never writes."""
    verification_id = keyring.code_entry_target(handle)
    state = db.one(_STATE, id=verification_id) if verification_id is not None else None
    channel = entry_channel(state) if state is not None else None
    row = presented_by(state, channel) if state is not None and channel is not None else None
    return from_state(row) if row is not None else Outcome(INVALID)


def confirm_entry(db: Database, keyring: Keyring, handle: str | None, code: str, failures_per_day: int = 0) -> Outcome:
    """The code-entry page's form: the handle names the verification, the code proves (confirm_code,
    the same tries and limits as the API). A code that did not prove, on a page that no longer asks
    for one (it ended, or a code of it proved), is answered with what the page's GET shows; a proof
    (a stale form's code of another step) is told as the proof it is."""
    verification_id = keyring.code_entry_target(handle)
    if verification_id is None:
        return logged(Outcome(INVALID))
    outcome = confirm_code(db, keyring, verification_id, code, failures_per_day)
    code_proved = any(p.via == "code" for p in outcome.proofs)
    if outcome.result != FINISHED and not (outcome.result == WRONG_CODE and code_proved):
        return outcome
    shown = preview_entry(db, keyring, handle)
    return replace(shown, result=LOCKED) if shown.result == PENDING else shown  # over the number's daily budget
