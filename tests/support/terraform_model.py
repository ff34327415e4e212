"""infra/*.tf parsed with python-hcl2 into plain Python values (quotes stripped), for the tests."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import hcl2

INFRA = Path(__file__).resolve().parents[2] / "infra"


def unquote(value: Any) -> Any:
    """python-hcl2 >= 8 keeps string quotes ("\\"x\\""); drop them and its block markers."""
    if isinstance(value, str):
        return value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else value
    if isinstance(value, list):
        return [unquote(v) for v in value]
    if isinstance(value, dict):
        return {unquote(k): unquote(v) for k, v in value.items() if k not in {"__is_block__", "__comments__"}}
    return value


@dataclass(frozen=True)
class Infra:
    files: dict[str, dict[str, Any]]

    def _blocks(self, kind: str) -> list[dict[str, Any]]:
        return [block for parsed in self.files.values() for block in parsed.get(kind, [])]

    @property
    def locals(self) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for block in self._blocks("locals"):
            merged.update(block)
        return merged

    @property
    def variables(self) -> dict[str, dict[str, Any]]:
        return {name: body for block in self._blocks("variable") for name, body in block.items()}

    def resources(self, rtype: str) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for block in self._blocks("resource"):
            for name, body in block.get(rtype, {}).items():
                found[name] = body
        return found

    def resource(self, rtype: str, name: str) -> dict[str, Any]:
        return self.resources(rtype)[name]

    @property
    def function_specs(self) -> dict[str, dict[str, Any]]:
        return self.locals["function_specs"]

    @property
    def entry_points(self) -> dict[str, str]:
        return {key: spec["entry_point"] for key, spec in self.function_specs.items()}


@lru_cache(maxsize=1)
def load_infra() -> Infra:
    files = {}
    for path in sorted(INFRA.glob("*.tf")):
        with path.open() as handle:
            files[path.name] = unquote(hcl2.load(handle))
    return Infra(files)


def first(block_list: list[dict[str, Any]]) -> dict[str, Any]:
    """A nested block (`settings { ... }`) parses as a one-element list."""
    assert isinstance(block_list, list) and len(block_list) == 1, block_list
    return block_list[0]


def tf_offline() -> tuple[str | None, str]:
    """The shared tool that runs the real terraform against stand-in providers, or why it cannot run.

    CI has shared/ beside the clone (../shared); a worktree elsewhere names it with TF_OFFLINE."""
    tool = os.environ.get("TF_OFFLINE") or str(
        INFRA.parents[1] / "shared" / "tools" / "terraform-offline" / "tf-offline"
    )
    if not Path(tool).is_file():
        return None, f"tf-offline not found at {tool} (set TF_OFFLINE to shared/tools/terraform-offline/tf-offline)"
    if not (os.environ.get("TF_OFFLINE_TERRAFORM") or shutil.which("terraform")):
        return None, "terraform is not installed (tf-offline runs the real binary; .ci/run requires it)"
    return tool, ""


def planned_addresses(plan_text: str) -> list[str]:
    """Resource addresses a `terraform plan` (human output) says it will create, change or replace."""
    return re.findall(r"^  # (\S+) (?:will be|must be) ", plan_text, flags=re.MULTILINE)
