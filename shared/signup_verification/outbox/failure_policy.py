"""What a failure for good sets off beyond its delivery (docs/channels.md, "Whose fault"):

  a recipient's fault        the exact destination goes on the suppression list for `suppress_days`
                             (None: until an operator clears it: `verifyctl suppression clear`)
  a channel-wide sender or   counted per channel; `hold_after` of them within `hold_window_seconds`
  account fault              hold the channel: the claim takes none of its intents (they wait, none
                             fails) until `hold_seconds` pass or an operator resumes it
                             (`verifyctl channel resume`), and `status` pages

The statements that record failures (outbox/settle.sql, the reports' ingest) apply both, in the
transaction of the failure, with these values as parameters.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FailurePolicy:
    suppress_days: float | None = None  # SUPPRESSION_DAYS (0 or unset: until cleared)
    hold_after: int = 3  # CHANNEL_HOLD_AFTER_FAULTS
    hold_window_seconds: float = 600.0  # CHANNEL_HOLD_WINDOW_SECONDS
    hold_seconds: float = 1800.0  # CHANNEL_HOLD_SECONDS

    @property
    def suppress_seconds(self) -> float | None:
        return None if self.suppress_days is None else self.suppress_days * 86400.0

    def parameters(self) -> dict[str, float | int | None]:
        """The statements' parameters (settle.sql, reports_ingest.sql)."""
        return {
            "suppress_seconds": self.suppress_seconds,
            "hold_after": self.hold_after,
            "hold_window": self.hold_window_seconds,
            "hold_seconds": self.hold_seconds,
        }
