"""One timestamp format everywhere: every `verifyctl --json` output, the reconcile and status
reports, and the mailbox's JSON write RFC 3339, UTC, `Z`, milliseconds (platform/timestamps.py; the
HTTP answers and webhook bodies are held to it by their schemas). Nothing in the package formats a
time any other way."""

from __future__ import annotations

import json
import re

from signup_verification import cli
from signup_verification.local.mailstore import Mailbox
from support.factories import make_verifications
from support.paths import ROOT

ANY_TIME = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?")
ONE_FORMAT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def _times(text: str) -> list[str]:
    return ANY_TIME.findall(text)


def _other_shapes(text: str) -> list[str]:
    return [t for t in _times(text) if not ONE_FORMAT.fullmatch(t)]


def test_every_json_output_of_verifyctl_has_one_timestamp_format(service_env, db, capsys):
    [vid] = make_verifications(db, 1)
    outputs = []
    for argv in (["dispatch", "--json"], ["reconcile", "--json"], ["--json", "status"], ["--json", "inspect", str(vid)],
                 ["--json", "migrate", "--list"], ["--json", "suppression", "list"]):  # fmt: skip
        assert cli.main(argv) == 0, argv
        outputs.append(capsys.readouterr().out)
    text = "\n".join(outputs)
    for output in outputs:
        json.loads(output)
    assert len(_times(text)) > 10  # the scan sees the times (status, the reconcile watermark, the timeline)
    assert _other_shapes(text) == []


def test_the_mailbox_json_has_the_same_format():
    box = Mailbox()
    box.add_sms("+14155550100", "+15005550006", "Your code is 123456")
    [message] = box.messages()
    assert ONE_FORMAT.fullmatch(message.to_json()["received_at"])


# platform/timestamps.py is the format; delivery/reports.py hands a provider's unix time to SQL as a
# timestamptz parameter (an input, never shown).
NOT_OUTPUT = {"platform/timestamps.py", "delivery/reports.py"}


def test_nothing_in_the_package_formats_a_time_another_way():
    package = ROOT / "shared" / "signup_verification"
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted(package.rglob("*.py"))
        if str(path.relative_to(package)) not in NOT_OUTPUT
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if (".isoformat(" in line and "fromisoformat" not in line)
        or "strftime(" in line
        or re.search(r":%[YHdm]", line)
    ]
    assert found == [], "format times with platform/timestamps.py rfc3339"
