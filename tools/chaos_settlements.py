"""The chaos run's check of the attempt log's settlements by a provider's report (`accepted`,
`provider_report`: an ambiguous or retryable attempt the report proved sent, whether it came before
the settle or after): each names the message or call a report of its attempt named, its sid, the only
reference an ambiguous send has. tools/chaos_reports.py runs it with its own checks."""

from __future__ import annotations

from chaos_checks import Findings
from signup_verification.platform.database import Database

# Settlements by a report that name no message or call a report of their attempt named (reports
# without a reference, as an email event without sg_message_id, leave nothing to name).
_UNNAMED = """
SELECT a.attempt_id, a.provider_ref FROM delivery_attempts AS a
 WHERE a.error_class = 'provider_report'
   AND EXISTS (SELECT 1 FROM delivery_observations AS o
                WHERE o.intent_id = a.intent_id AND o.attempt_id = a.attempt_id AND o.provider_ref IS NOT NULL)
   AND NOT EXISTS (SELECT 1 FROM delivery_observations AS o
                    WHERE o.intent_id = a.intent_id AND o.attempt_id = a.attempt_id AND o.provider_ref = a.provider_ref)
"""


def check_settlements_named(db: Database, found: Findings) -> None:
    """Each unnamed settlement is a violation; the figure is how many settlements there were to check."""
    for a in db.rows(_UNNAMED):
        found.fail("reports_explained", f"attempt {a['attempt_id']} settled by a report, naming {a['provider_ref']}"
                   " instead of the message or call its reports named")  # fmt: skip
    found.figures["reports_settlements"] = db.run(
        "SELECT count(*) FROM delivery_attempts WHERE error_class = 'provider_report'"
    )[0][0]
