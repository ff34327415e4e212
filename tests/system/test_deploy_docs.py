"""docs/deploy.md and docs/capacity.md state what infra/ does (the functions, who calls them, which
secrets each reads, the scheduler jobs, the connection budget, the tier) in blocks rendered from the
parsed Terraform (support/deploy_docs.py), never typed by hand. tests/system/test_infra_plan.py
checks the same blocks against the real plan's outputs."""

from __future__ import annotations

import pytest

from support.deploy_docs import DOCS, blocks, render_file
from support.terraform_model import load_infra


@pytest.mark.parametrize("doc", ["deploy.md", "capacity.md"])
def test_the_generated_blocks_match_infra(doc):
    text = (DOCS / doc).read_text()
    assert blocks(text), f"{doc} has no generated block"
    assert render_file(text, load_infra()) == text, (
        f"docs/{doc} is stale: run .venv/bin/python tests/support/deploy_docs.py --write"
    )


def test_a_number_typed_into_a_block_is_caught():
    text = (DOCS / "deploy.md").read_text()
    edited = text.replace("= **84** connections", "= **75** connections")
    assert edited != text and render_file(edited, load_infra()) == text


def test_the_deploy_guide_names_every_function_job_and_secret_reader():
    functions = blocks((DOCS / "deploy.md").read_text())["functions"]
    infra = load_infra()
    for key, spec in infra.function_specs.items():
        assert f"`NAME-{key}` | `{spec['entry_point']}`" in functions
    assert functions.startswith(f"{len(infra.function_specs)} functions")
    assert f"{len(infra.locals['scheduler_jobs'])} Cloud Scheduler jobs" in functions
    reconcile = next(line for line in functions.splitlines() if line.startswith("| `NAME-reconcile`"))
    assert "`TWILIO_AUTH_TOKEN`" in reconcile
