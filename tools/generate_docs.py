"""Write the documentation sections that the code defines, so they are never typed twice.

    python tools/generate_docs.py          rewrite them in place
    python tools/generate_docs.py --check  exit 1 naming each section that is not current (a test runs it)

A section lives between `<!-- generated: NAME -->` and `<!-- end: NAME -->` in a Markdown file;
everything outside the markers is written by hand.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "shared"))

from signup_verification.delivery.classification import Fault, Rule, sendgrid, smtp, twilio  # noqa: E402

_FAULTS = {Fault.RECIPIENT: "recipient", Fault.SENDER_OR_ACCOUNT: "sender or account", Fault.TRANSIENT_OR_UNKNOWN: "-"}


def _rule_table(first: str, rows: Iterable[tuple[str, Rule]]) -> str:
    lines = [
        f"| {first} | meaning | final | whose fault | reason | holds the channel | source |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, rule in rows:
        lines.append(
            f"| `{key}` | {rule.meaning} | {'yes' if rule.final else 'no'} | {_FAULTS[rule.fault]} | "
            f"`{rule.category.value}` | {'yes' if rule.holds_channel else ''} | [docs]({rule.source}) |"
        )
    return "\n".join(lines)


def twilio_errors() -> str:
    rows = [(str(code), rule) for code, rule in sorted(twilio.ERRORS.items())]
    return _rule_table("ErrorCode", [*rows, ("other", twilio.UNKNOWN)])


def sendgrid_submission() -> str:
    return _rule_table("answer", sendgrid.SUBMISSION.items())


def sendgrid_events() -> str:
    rows = [(event, rule) for event, rule in sendgrid.EVENTS.items()]
    rows += [(f"dropped: {reason}", rule) for reason, (_, rule) in sendgrid.DROP_REASONS.items()]
    return _rule_table("event", [*rows, ("dropped: other", sendgrid.DROPPED_OTHER)])


def smtp_codes() -> str:
    rows = [(code, rule) for code, rule in smtp.ENHANCED.items()]
    rows += [(f"{subject}.x", rule) for subject, rule in smtp.SUBJECTS.items()]
    rows += [
        ("5yz refusing us", smtp.REFUSES_US),
        ("550/553 at RCPT", smtp.NO_SUCH_MAILBOX),
        ("5yz at DATA", smtp.MESSAGE_REFUSED),
        ("other 5yz", smtp.OTHER),
    ]
    return _rule_table("reply", rows)


SECTIONS: dict[str, tuple[str, Callable[[], str]]] = {
    "twilio-errors": ("docs/channels.md", twilio_errors),
    "sendgrid-submission": ("docs/channels.md", sendgrid_submission),
    "sendgrid-events": ("docs/channels.md", sendgrid_events),
    "smtp-codes": ("docs/channels.md", smtp_codes),
}


def _replaced(text: str, name: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- generated: {re.escape(name)} -->\n).*?(<!-- end: {re.escape(name)} -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"generate_docs: no <!-- generated: {name} --> ... <!-- end: {name} --> markers")
    return pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)


def main(argv: list[str]) -> int:
    check = argv[1:] == ["--check"]
    stale = []
    for name, (relative, build) in SECTIONS.items():
        path = ROOT / relative
        text = path.read_text()
        updated = _replaced(text, name, build())
        if updated != text:
            if check:
                stale.append(f"{relative} ({name})")
            else:
                path.write_text(updated)
    if stale:
        print("generate_docs: not current, run python tools/generate_docs.py: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
