"""What one dispatch invocation did: the counts it answers (the dispatch target's JSON) and the
`dispatch_summary` record it logs."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, assert_never

from ..delivery.sending import SendOutcome
from ..outbox import transitions
from ..outbox.states import IntentStatus

_log = logging.getLogger("signup_verification.operations.dispatcher")
# What became of the claimed intents, in the order a person reads them. `undeliverable`: the provider
# accepted the send, but a final report of it that came first (stored before the settle) failed it.
_OUTCOMES = ("accepted", "retryable", "failed", "undeliverable", "ambiguous", "suppressed", "released")


@dataclass
class DispatchReport:
    claimed: int = 0
    accepted: int = 0
    retryable: int = 0
    failed: int = 0  # the send failed for good (refused, attempts exhausted)
    undeliverable: int = 0  # accepted by the provider, then failed by its final report (no send failure)
    ambiguous: int = 0
    suppressed: int = 0
    released: int = 0
    stale_writes: int = 0
    batches: int = 0
    elapsed_ms: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    def summary(self) -> str:
        """The report for a person (`verifyctl dispatch`; its --json is as_dict())."""
        if not self.moved:
            return f"dispatch: nothing was ready to send ({self.elapsed_ms} ms)"
        outcomes = ", ".join(f"{n} {name}" for name, n in self.as_dict().items() if name in _OUTCOMES and n)
        line = f"dispatch: claimed {self.claimed} in {self.batches} batch(es), {self.elapsed_ms} ms: {outcomes or 'none settled'}"
        if self.stale_writes:
            line += f"; {self.stale_writes} outcome(s) not recorded: another worker had taken the intent over"
        return line

    def count(self, settled: IntentStatus) -> None:
        """One settled intent, by the status outbox/queries/settle.sql:settle left."""
        match settled:
            case IntentStatus.ACCEPTED:
                self.accepted += 1
            case IntentStatus.RETRYABLE:
                self.retryable += 1
            case IntentStatus.AMBIGUOUS:
                self.ambiguous += 1
            case IntentStatus.FAILED:
                self.failed += 1
            case IntentStatus.READY | IntentStatus.CLAIMED | IntentStatus.ATTEMPTING | IntentStatus.SUPPRESSED:
                raise ValueError(f"settle never leaves an intent {settled}")
            case _:
                assert_never(settled)

    def tally(self, outcomes: Sequence[SendOutcome], applied: Mapping[int, str]) -> None:
        """Count a settled batch by the status outbox/queries/settle.sql:settle left; an outcome that did not apply is stale.
        A send whose final provider report was stored first is failed by the settle whatever the send's own
        outcome (accepted, ambiguous, retryable): the provider took it and reported it undeliverable, which
        is no failure of the send."""
        self.stale_writes += len(outcomes) - len(applied)
        for outcome in outcomes:
            status = applied.get(outcome.intent.id)
            if status is None:
                _log.warning(
                    "stale write: intent %s was taken over before its %s outcome was recorded",
                    outcome.intent.id,
                    outcome.result.outcome,
                    extra={"json_fields": {"event": "stale_write", "intent_id": outcome.intent.id}},
                )
            elif status == transitions.UNDELIVERABLE:
                self.undeliverable += 1
            else:
                self.count(IntentStatus(status))

    @property
    def moved(self) -> bool:
        """Whether this run changed anything: an idle tick claims, releases and suppresses nothing."""
        return bool(self.claimed or self.released or self.suppressed or self.stale_writes)

    def log(self, extra_fields: dict[str, Any], moved_otherwise: bool) -> None:
        """The `dispatch_summary` record: INFO when anything moved, DEBUG for an idle tick."""
        fields = {"event": "dispatch_summary", **self.as_dict(), **extra_fields}
        _log.log(
            logging.INFO if self.moved or moved_otherwise else logging.DEBUG,
            "dispatch: %s",
            " ".join(f"{k}={v}" for k, v in self.as_dict().items()),
            extra={"json_fields": fields},
        )
