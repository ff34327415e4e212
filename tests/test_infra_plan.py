"""infra/ checked by the real terraform (tf-offline: stand-in providers serving the real schemas of
hashicorp/google 7.45.0 and hashicorp/time, no network): .ci/run's terraform step, and what a
second plan after an apply would show, as far as a plan from empty state can tell.

tf-offline refuses `apply`, so "apply, then plan again" cannot run here. What makes a second plan
noisy is configuration the API normalises away; the dashboard's is checked in the planned JSON.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from terraform_model import INFRA, planned_addresses, tf_offline

ROOT = INFRA.parent
EXAMPLE = INFRA / "terraform.tfvars.example"


def run_tool(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    tool, reason = tf_offline()
    if tool is None:
        pytest.skip(reason)
    return subprocess.run(["bash", tool, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "NO_COLOR": "1"})


@pytest.fixture(scope="module")
def plan_text(tmp_path_factory) -> str:
    """The CI step's plan of infra/ with the example variables (a placeholder bundle: only its hash counts)."""
    bundle = tmp_path_factory.mktemp("bundle") / "function-source.zip"
    bundle.write_bytes(b"placeholder")
    result = run_tool("plan", str(INFRA), f"-var-file={EXAMPLE}", f"-var=source_archive={bundle}")
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    return result.stdout


def test_terraform_formats_and_validates_infra():
    fmt = run_tool("fmt-check", str(INFRA))
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
    validate = run_tool("validate", str(INFRA))
    assert validate.returncode == 0, validate.stdout + validate.stderr
    # The constraints admit the served versions (a constraint that excluded them fails init).
    assert "hashicorp/google 7.45.0" in validate.stderr and "hashicorp/time" in validate.stderr


def test_a_broken_configuration_fails_the_step(tmp_path: Path):
    """The check can fail: an unknown argument in a copy of infra/ is terraform's error, exit 1."""
    copy = tmp_path / "infra"
    copy.mkdir()
    for path in INFRA.glob("*.tf"):
        (copy / path.name).write_text(path.read_text())
    broken = (copy / "source.tf").read_text().replace("force_destroy               = false",
                                                     "force_destroy               = false\n  no_such_argument = 1")
    (copy / "source.tf").write_text(broken)
    result = run_tool("validate", str(copy))
    assert result.returncode == 1
    assert "Unsupported argument" in result.stdout + result.stderr


def test_the_example_variables_plan_every_function_and_wait(plan_text: str):
    addresses = planned_addresses(plan_text)
    functions = {a for a in addresses if a.startswith("google_cloudfunctions2_function.function[")}
    assert functions == {f'google_cloudfunctions2_function.function["{k}"]'
                         for k in ("create", "confirm", "dispatch", "reconcile", "status")}
    assert {"time_sleep.iam_grants", "time_sleep.metrics"} <= set(addresses)
    assert re.search(r"^Plan: \d+ to add, 0 to change, 0 to destroy\.$", plan_text, re.MULTILINE)


def _planned_block(plan_text: str, address: str) -> str:
    start = plan_text.index(f"  # {address} will be created")
    end = plan_text.find("\n  # ", start + 1)
    return plan_text[start:end]


def test_the_dashboard_holds_no_field_the_api_drops(plan_text: str):
    """An empty legend, empty thresholds or a zero position would be dropped by the API and come
    back as a change on every plan (hashicorp/terraform-provider-google#16173)."""
    dashboard = _planned_block(plan_text, "google_monitoring_dashboard.signals")
    assert not re.search(r'legendTemplate\s+= ""', dashboard)
    assert not re.search(r"thresholds\s+= \[\]", dashboard)
    assert not re.search(r"[xy]Pos\s+= 0\s*$", dashboard, re.MULTILINE)
    # What is meant is still there: legends of the multi-metric chart, thresholds, positions.
    assert len(re.findall(r'legendTemplate\s+= "attempts_\w+ \$\{metric\.labels\.channel\}"', dashboard)) == 4
    assert len(re.findall(r"thresholds\s+= \[\s*\n\s*\+ \{", dashboard)) == 2
    assert re.search(r"xPos\s+= 24", dashboard) and re.search(r"yPos\s+= 32", dashboard)


def test_replaced_bundles_expire_and_the_live_one_stays(plan_text: str):
    bucket = _planned_block(plan_text, "google_storage_bucket.source")
    condition = re.search(r"\+ condition \{(.*?)\}", bucket, re.DOTALL).group(1)
    assert re.search(r"days_since_noncurrent_time\s+= 30", condition)
    assert re.search(r'with_state\s+= "ARCHIVED"', condition)
    # ANDed with the above, either would keep the rule from ever matching a hash-named bundle.
    assert "num_newer_versions" not in condition and not re.search(r"\bage\s+=", condition)
    assert re.search(r"versioning \{\s*\n\s*\+ enabled = true", bucket)
