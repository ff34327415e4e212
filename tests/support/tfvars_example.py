"""infra/terraform.tfvars.example with its commented-out settings uncommented: what CI plans besides
the file as it is, so that every optional block the example offers is known to plan.

    python3 tests/support/tfvars_example.py [EXAMPLE] > all-blocks.tfvars

A commented-out setting is a line `# name = value` (a lowercase identifier, then `=`); when its
value opens a `{` or `[` that the line does not close, the commented lines after it belong to it
until the brackets balance. Prose comments never start that way.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "infra" / "terraform.tfvars.example"
_SETTING = re.compile(r"^#\s?([a-z_][a-z0-9_]*\s*=.*)$")


def _depth(text: str) -> int:
    code = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text.split(" #", 1)[0])
    return code.count("{") + code.count("[") - code.count("}") - code.count("]")


def commented_blocks(text: str) -> list[list[str]]:
    """The commented-out settings, each as its uncommented lines."""
    blocks: list[list[str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = _SETTING.match(lines[i])
        if not match:
            i += 1
            continue
        block, depth = [match.group(1)], _depth(match.group(1))
        i += 1
        while depth > 0 and i < len(lines) and lines[i].startswith("#"):
            line = re.sub(r"^#\s?", "", lines[i])
            block.append(line)
            depth += _depth(line)
            i += 1
        if depth != 0:
            raise ValueError(f"unbalanced commented block starting {block[0]!r}")
        blocks.append(block)
    return blocks


def uncommented(text: str) -> str:
    """The example with every commented-out setting active (the rest of the file unchanged)."""
    extra = [line for block in commented_blocks(text) for line in block]
    return (
        text.rstrip("\n") + "\n\n# ---- the commented-out settings above, uncommented ----\n" + "\n".join(extra) + "\n"
    )


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else EXAMPLE
    sys.stdout.write(uncommented(path.read_text()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
