"""Write the documentation sections that the code defines, so they are never typed twice: the
providers' classification tables (docs/channels.md), the problem types (docs/problems.md, from
api/problem_types.py) and the settings tables (README.md, from each setting's declaration:
platform/settings.py).

    python tools/generate_docs.py          rewrite them in place
    python tools/generate_docs.py --check  exit 1 naming each section that is not current (a test runs it)

A section lives between `<!-- generated: NAME -->` and `<!-- end: NAME -->` in a Markdown file;
everything outside the markers is written by hand.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "shared"))

from signup_verification.api.config import AuthConfig, DeliveryReportsConfig, HttpConfig, ReturnUrlConfig  # noqa: E402
from signup_verification.config import Config  # noqa: E402
from signup_verification.delivery.capacity_config import FanoutConfig, PacingConfig  # noqa: E402
from signup_verification.delivery.classification import (  # noqa: E402
    Fault,
    Rule,
    Scope,
    sendgrid,
    smtp,
    twilio,
    twilio_voice,
    twilio_whatsapp,
)
from signup_verification.delivery.config import (  # noqa: E402
    ChannelsConfig,
    MessageConfig,
    SendGridConfig,
    SmtpConfig,
    TwilioConfig,
    VoiceConfig,
    WebhookConfig,
    WhatsAppConfig,
)
from signup_verification.operations.config import (  # noqa: E402
    TWILIO_LOOKUP,
    DispatchConfig,
    ReconcilerConfig,
    SignalsConfig,
    TwilioLookupConfig,
)
from signup_verification.outbox.config import FailurePolicy, NudgeConfig, RetryPolicy  # noqa: E402
from signup_verification.platform.config import (  # noqa: E402
    K_SERVICE,
    STATE_HOME,
    DatabaseConfig,
    LoggingConfig,
    MigrationConfig,
    ShutdownConfig,
)
from signup_verification.platform.settings import VIEW, Setting, settings_of  # noqa: E402
from signup_verification.verifications.config import AbuseConfig, ConfirmConfig, CreateConfig, TokenConfig  # noqa: E402

_FAULTS = {Fault.RECIPIENT: "recipient", Fault.SENDER_OR_ACCOUNT: "sender or account", Fault.TRANSIENT_OR_UNKNOWN: "-"}
_SCOPES = {
    Scope.ACCOUNT: "**account**: holds the channel",
    Scope.ROUTE: "route: may hold its route",
    Scope.MESSAGE: "-",
}


def _scope(rule: Rule) -> str:
    if rule.scope is Scope.ACCOUNT and not rule.final:
        return "**account**: slows the channel"
    return _SCOPES[rule.scope]


def _rule_table(first: str, rows: Iterable[tuple[str, Rule]]) -> str:
    lines = [
        f"| {first} | meaning | final | whose fault | reason | scope | source |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, rule in rows:
        lines.append(
            f"| `{key}` | {rule.meaning} | {'yes' if rule.final else 'no'} | {_FAULTS[rule.fault]} | "
            f"`{rule.category.value}` | {_scope(rule)} | [docs]({rule.source}) |"
        )
    return "\n".join(lines)


def twilio_errors() -> str:
    rows = [(str(code), rule) for code, rule in sorted(twilio.ERRORS.items())]
    return _rule_table("ErrorCode", [*rows, ("other", twilio.UNKNOWN)])


def whatsapp_errors() -> str:
    rows = [(str(code), rule) for code, rule in sorted(twilio_whatsapp.ERRORS.items())]
    return _rule_table("ErrorCode", [*rows, ("other", twilio.UNKNOWN)])


def voice_outcomes() -> str:
    rows = [(str(code), rule) for code, rule in sorted(twilio_voice.ERRORS.items())]
    rows += [(f"CallStatus {status}", rule) for status, rule in twilio_voice.CALL_STATUSES.items()]
    rows += [(f"AnsweredBy {result}", rule) for result, rule in twilio_voice.ANSWERED_BY.items()]
    return _rule_table("answer or report", [*rows, ("other", twilio_voice.UNKNOWN)])


def sendgrid_submission() -> str:
    return _rule_table("answer", sendgrid.SUBMISSION.items())


def sendgrid_events() -> str:
    rows = [(f"bounce: bounce_classification {name}", rule) for name, rule in sendgrid.BOUNCE_CLASSIFICATIONS.items()]
    rows += [(f"bounce: type {kind}", rule) for kind, rule in sendgrid.BOUNCE_TYPES.items()]
    rows += [(event, rule) for event, rule in sendgrid.EVENTS.items()]
    rows += [(f"dropped: {reason}", rule) for reason, (_, rule) in sendgrid.DROP_REASONS.items()]
    return _rule_table("event", [*rows, ("dropped: other", sendgrid.DROPPED_OTHER)])


def smtp_codes() -> str:
    rows = [(code, rule) for code, rule in smtp.ENHANCED.items()]
    rows += [(f"{subject}.x", rule) for subject, rule in smtp.SUBJECTS.items()]
    rows += [
        ("5yz to the session or MAIL", smtp.REFUSES_US),
        ("530 at RCPT or DATA", smtp.AUTHENTICATION_REQUIRED),
        ("550/553 at RCPT", smtp.NO_SUCH_MAILBOX),
        ("5yz at DATA", smtp.MESSAGE_REFUSED),
        ("other 5yz", smtp.OTHER),
    ]
    return _rule_table("reply", rows)


# README.md's settings tables, in order: the settings of each config's fields in field order, and
# settings no field reads directly. A setting appears once, in the first table that reads it; a field
# that derives its value from a setting shown elsewhere (a view: `production` from ENVIRONMENT) adds
# no row. tests/unit/test_config.py checks every variable the loader reads has its row.
SETTINGS_TABLES: dict[str, tuple[type | Setting[Any], ...]] = {
    "settings": (
        Config,
        STATE_HOME,
        DatabaseConfig,
        TokenConfig,
        CreateConfig,
        AbuseConfig,
        ConfirmConfig,
        FailurePolicy,
        ReturnUrlConfig,
        HttpConfig,
    ),
    "settings-dispatch": (
        ChannelsConfig,
        MessageConfig,
        SmtpConfig,
        SendGridConfig,
        TwilioConfig,
        WhatsAppConfig,
        VoiceConfig,
        DispatchConfig,
        PacingConfig,
        FanoutConfig,
        NudgeConfig,
        ShutdownConfig,
        RetryPolicy,
        WebhookConfig,
    ),
    "settings-reports": (DeliveryReportsConfig,),
    "settings-operations": (
        ReconcilerConfig,
        TWILIO_LOOKUP,
        TwilioLookupConfig,
        SignalsConfig,
        LoggingConfig,
        K_SERVICE,
    ),
    "settings-migrations": (MigrationConfig,),
    "settings-callers": (AuthConfig,),
}


def settings_rows() -> dict[str, list[Setting[Any]]]:
    shown: set[str] = set()
    rows: dict[str, list[Setting[Any]]] = {}
    for table, sources in SETTINGS_TABLES.items():
        rows[table] = []
        for source in sources:
            specs = (
                [source] if isinstance(source, Setting) else [s for f, s in settings_of(source) if not f.metadata[VIEW]]
            )
            for spec in specs:
                if spec.env not in shown:
                    shown.add(spec.env)
                    rows[table].append(spec)
    return rows


def settings_table(table: str) -> str:
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    rows = settings_rows()
    earlier = [spec for name in list(rows)[: list(rows).index(table)] for spec in rows[name]]
    shown = {alias for spec in earlier for alias in spec.aliases}  # an alias is named on its first row only
    for spec in rows[table]:
        aliases = [alias for alias in spec.aliases if alias not in shown]
        shown.update(aliases)
        names = f"`{spec.env}`" + "".join(f" (or `{alias}`)" for alias in aliases)
        lines.append(f"| {names} | {spec.shown()} | {spec.help} |")
    return "\n".join(lines)


def transitions() -> str:
    """The outbox's transitions (the `-- transition:` lines of its catalogue), as docs/state-model.md shows them."""
    from signup_verification.outbox.states import transitions

    lines = ["| statement | from | to | why |", "|---|---|---|---|"]
    for t in transitions():
        before = ", ".join(f"`{s}`" for s in sorted(t.before)) or "(new)"
        after = ", ".join(f"`{s}`" for s in sorted(t.after))
        lines.append(f"| `{t.statement}` | {before} | {after} | {t.why} |")
    return "\n".join(lines)


def problem_types() -> str:
    """Every problem type an answer can carry (api/problem_types.py), as docs/problems.md lists them."""
    from signup_verification.api.problem_types import TYPES

    lines = ["| `type` | status | title | what it means, what to do |", "|---|---|---|---|"]
    for t in TYPES.values():
        statuses = ", ".join(str(s) for s in t.statuses)
        lines.append(f'| <a id="{t.slug}"></a>`{t.uri}` | {statuses} | {t.title} | {t.meaning} |')
    return "\n".join(lines)


SECTIONS: dict[str, tuple[str, Callable[[], str]]] = {
    "transitions": ("docs/state-model.md", transitions),
    "problem-types": ("docs/problems.md", problem_types),
    "twilio-errors": ("docs/channels.md", twilio_errors),
    "whatsapp-errors": ("docs/channels.md", whatsapp_errors),
    "voice-outcomes": ("docs/channels.md", voice_outcomes),
    "sendgrid-submission": ("docs/channels.md", sendgrid_submission),
    "sendgrid-events": ("docs/channels.md", sendgrid_events),
    "smtp-codes": ("docs/channels.md", smtp_codes),
    **{table: ("README.md", functools.partial(settings_table, table)) for table in SETTINGS_TABLES},
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
