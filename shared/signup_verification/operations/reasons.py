"""A failed delivery's reason as operators read it (`verifyctl inspect`): the verdict recorded on the
intent (delivery/classification/), in the read API's shape."""

from __future__ import annotations

from typing import Any

_FAULTS = {"recipient": "the recipient's fault", "sender_or_account": "our sender's or account's fault"}


def failure_reason(row: dict[str, Any]) -> dict[str, Any] | None:
    """{category, code, provider, fault} of a failed delivery's row; None while it has not failed."""
    if row.get("failure_category") is None:
        return None
    return {
        "category": row["failure_category"],
        "code": row["failure_code"],
        "provider": row["failure_provider"],
        "fault": row["failure_fault"],
    }


def render_reason(reason: dict[str, Any]) -> str:
    """`bounced (sendgrid 5.1.1; the recipient's fault)`."""
    source = " ".join(str(p) for p in (reason.get("provider"), reason.get("code")) if p)
    fault = _FAULTS.get(reason.get("fault") or "", "nobody's fault we can name")
    return f"{reason['category']} ({source + '; ' if source else ''}{fault})"
