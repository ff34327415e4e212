"""infra/ planned by the real terraform (tf-offline), once per session per variables file, for the
tests that read plans: tests/system/test_infra_plan.py, test_infra_platform.py, test_infra_tiers.py
and test_plan_cost.py.

A plan runs on a copy of infra/ with probe outputs added: values terraform renders structurally in a
plan (JSON strings) or spreads over many blocks come out whole, base64-encoded. `plan_of("example")`
is .ci/run's plan of the example (the standard tier); `plan_of("all-blocks")` the example with every
commented-out block uncommented (.ci/run's second plan); `plan_of("small")` and `plan_of("large")`
the example with that tier. Each also carries `terraform show -json` of itself (`.shown`).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from support.terraform_model import INFRA, load_infra, tf_offline
from support.tfvars_example import uncommented

EXAMPLE = INFRA / "terraform.tfvars.example"


TIERS = ("small", "large")  # beside the example's standard
_KEPT = re.compile(r"^tf-offline: kept the working copy: (.+)$", re.MULTILINE)


def run_tool(*args: str, timeout: int = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    tool, reason = tf_offline()
    if tool is None:
        pytest.skip(reason)
    return subprocess.run(
        ["bash", tool, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
    )


def show_json(result: subprocess.CompletedProcess, out: Path) -> dict[str, Any]:
    """`terraform show -json` of the plan tf-offline wrote to `out`, in the working copy it kept."""
    kept = _KEPT.search(result.stderr)
    assert kept, "tf-offline did not keep its working copy"
    try:
        shown = subprocess.run(
            [os.environ.get("TF_OFFLINE_TERRAFORM") or "terraform", "show", "-json", "-no-color", str(out)],
            cwd=kept.group(1),
            env={**os.environ, "TF_CLI_CONFIG_FILE": os.devnull, "CHECKPOINT_DISABLE": "1"},
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
    finally:
        shutil.rmtree(Path(kept.group(1)).parent, ignore_errors=True)
    return json.loads(shown.stdout)


def alert_probe() -> str:
    """An output holding every alert policy's documentation text, by address, whatever the policies'
    resources are (for_each, count or single: read from infra/ itself)."""
    parts = []
    for name, body in sorted(load_infra().resources("google_monitoring_alert_policy").items()):
        address = f"google_monitoring_alert_policy.{name}"
        if "for_each" in body:
            parts.append(f'{{ for k, p in {address} : "{address}[${{k}}]" => p.documentation[0].content }}')
        elif "count" in body:
            parts.append(f'{{ for i, p in {address} : "{address}[${{i}}]" => p.documentation[0].content }}')
        else:
            parts.append(f'{{ "{address}" = {address}.documentation[0].content }}')
    return f"""
output "probe_alerts_b64" {{
  value = base64encode(jsonencode(merge({", ".join(parts)})))
}}
"""


def probes() -> str:
    return """
output "probe_dashboard_json_b64" {
  value = base64encode(try(google_monitoring_dashboard.signals[0].dashboard_json, "{}"))
}
""" + alert_probe()


def copy_infra(dest: Path, extra: str = "") -> Path:
    dest.mkdir()
    for path in INFRA.glob("*.tf"):
        (dest / path.name).write_text(path.read_text())
    if extra:
        (dest / "zz_probe.tf").write_text(extra)
    return dest


@dataclass(frozen=True)
class Plan:
    text: str
    copy: str  # the probed copy of infra/, to plan variations of
    bundle_arg: str  # -var=source_archive=... (a placeholder bundle: only its hash counts)
    var_file: Path
    shown: dict[str, Any] = field(default_factory=dict)  # terraform show -json of it

    @property
    def args(self) -> list[str]:
        return [self.copy, f"-var-file={self.var_file}", self.bundle_arg]

    def probe(self, name: str):
        encoded = re.search(rf'\+ probe_{name}_b64\s+= "([A-Za-z0-9+/=]+)"', self.text)
        assert encoded, f"no probe_{name}_b64 in the plan"
        return json.loads(base64.b64decode(encoded.group(1)))


_WORKDIRS: list[tempfile.TemporaryDirectory] = []  # kept until the session ends


@cache
def plan_of(name: str) -> Plan:
    workdir = tempfile.TemporaryDirectory(prefix=f"infra-plan-{name}-")
    _WORKDIRS.append(workdir)
    tmp = Path(workdir.name)
    bundle = tmp / "function-source.zip"
    bundle.write_bytes(b"placeholder")
    var_file = EXAMPLE
    if name == "all-blocks":
        var_file = tmp / "all-blocks.tfvars"
        var_file.write_text(uncommented(EXAMPLE.read_text()))
    elif name in TIERS:
        var_file = tmp / f"{name}.tfvars"
        text, count = re.subn(r"^tier\s*=.*$", f'tier = "{name}"', EXAMPLE.read_text(), flags=re.MULTILINE)
        assert count == 1, "the example sets the tier once"
        var_file.write_text(text)
    copy = copy_infra(tmp / "infra", probes())
    plan = Plan("", str(copy), f"-var=source_archive={bundle}", var_file)
    out = tmp / "tfplan"
    result = run_tool("plan", *plan.args, f"-out={out}", env={"TF_OFFLINE_KEEP_WORKDIR": "1"})
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    return Plan(result.stdout, plan.copy, plan.bundle_arg, var_file, show_json(result, out))


def planned_block(plan_text: str, address: str) -> str:
    start = plan_text.index(f"  # {address} will be created")
    end = plan_text.find("\n  # ", start + 1)
    return plan_text[start:end]
