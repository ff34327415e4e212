"""tools/plan_cost.py prices the Terraform plan itself (`terraform show -json`: the example's, which is
the standard tier, and each other tier's, planned once a session by support/infra_plans.py), from
the one price table of tools/plan_prices.py; docs/deploy.md shows that table as it is."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys

import pytest

from support.deploy_docs import DOCS
from support.infra_plans import plan_of
from support.markdown import section
from support.terraform_model import INFRA

ROOT = INFRA.parent
sys.path.insert(0, str(ROOT / "tools"))
import plan_cost  # noqa: E402
import plan_prices  # noqa: E402

TIERS = {"small": "small", "standard": "example", "large": "large"}


@pytest.fixture(scope="module")
def priced() -> dict[str, plan_cost.Costs]:
    return {tier: plan_cost.costs(plan_of(name).shown) for tier, name in TIERS.items()}


def test_the_small_tier_idles_for_at_most_15_dollars_a_month(priced):
    small = priced["small"]
    assert small.tier == "small" and not small.unpriced
    assert small.idle_usd <= 15.0, plan_cost.render(small)
    items = " | ".join(line.item for line in small.idle)
    assert "Cloud SQL db-f1-micro ZONAL" in items and "warm instance" not in items
    assert "kept open all minute" not in items  # no invocation kept open
    conditions = next(line for line in small.idle if line.item == "Cloud Monitoring alerting conditions")
    assert conditions.quantity == "2"  # the digest page and the absence page


def test_each_tier_costs_what_its_plan_holds(priced):
    standard, large = priced["standard"], priced["large"]
    assert not standard.unpriced and not large.unpriced
    assert priced["small"].idle_usd < standard.idle_usd < large.idle_usd
    items = {line.item: line.usd for line in standard.idle}
    assert items["Cloud SQL db-custom-1-3840 REGIONAL"] == pytest.approx(730 * (0.0413 + 3.75 * 0.007) * 2, abs=0.01)
    assert items["Cloud Run confirm: 1 warm instance(s)"] == pytest.approx(730 * 3600 * 1.5 * 0.0000025, abs=0.01)
    assert "Cloud Run dispatch: an invocation kept open all minute" in items
    # per 1,000 verifications: eight requests per instance (large) bill less than one (standard)
    assert large.per_thousand_usd < standard.per_thousand_usd < priced["small"].per_thousand_usd
    assert standard.messages_per_thousand == pytest.approx(800 * 0.0009 + 200 * (0.0083 + 0.0035))


def test_the_tool_reads_the_plan_not_a_copy_of_it(priced):
    """A warm create instance added to the plan is priced; an instance tier without a list price is
    said to be unpriced, never guessed."""
    shown = copy.deepcopy(plan_of("small").shown)
    for resource in shown["planned_values"]["root_module"]["resources"]:
        if resource["type"] == "google_cloud_run_v2_service" and resource["index"] == "create":
            resource["values"]["template"][0]["scaling"][0]["min_instance_count"] = 1
    warm = plan_cost.costs(shown)
    assert warm.idle_usd - priced["small"].idle_usd == pytest.approx(730 * 3600 * 1.5 * 0.0000025, abs=0.02)
    for resource in shown["planned_values"]["root_module"]["resources"]:
        if resource["type"] == "google_sql_database_instance":
            resource["values"]["settings"][0]["tier"] = "db-perf-optimized-N-8"
    assert "Cloud SQL db-perf-optimized-N-8 ZONAL" in plan_cost.costs(shown).unpriced


def test_the_command_prices_a_plan_file_with_the_standard_library_only(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(plan_of("small").shown))
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(ROOT / "tools" / "plan_cost.py"), "--plan-json", str(plan), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    figures = json.loads(done.stdout)
    assert figures["tier"] == "small" and figures["idle_usd_per_month"] <= 15
    bad = tmp_path / "other.json"
    bad.write_text(json.dumps({"planned_values": {"root_module": {"resources": []}}}))
    refused = subprocess.run([sys.executable, "-I", "-S", str(ROOT / "tools" / "plan_cost.py"), "--plan-json", str(bad)],
                             capture_output=True, text=True)  # fmt: skip
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1 and "plan of infra/" in refused.stderr


def test_every_price_names_its_source_and_date_and_the_guide_shows_the_table():
    for price in plan_prices.PRICES:
        assert price.source.startswith("https://") and re.search(r"\b20\d\d\b", price.read), price.key
    assert set(plan_prices.FREE) <= set(plan_prices.PRICE)
    costs = section(DOCS / "deploy.md", "## What a deployment costs")
    assert plan_prices.table() in costs, "docs/deploy.md's price table differs from tools/plan_prices.py's"


def test_the_guide_gives_each_tiers_figures_as_the_tool_prices_them(priced):
    costs = section(DOCS / "deploy.md", "## What a deployment costs")
    for tier, c in priced.items():
        row = next(line for line in costs.splitlines() if line.startswith(f"| `{tier}` |"))
        cells = [cell.strip().strip("*") for cell in row.split("|")[1:-1]]
        assert cells[1] == f"${c.idle_usd:,.2f}", (tier, plan_cost.render(c))
        assert cells[5] == f"${c.idle_free_usd:,.2f}" and cells[6] == f"${c.per_thousand_usd:.3f}", tier
        assert cells[7] == f"${c.messages_per_thousand:.2f}", tier
