"""The code blocks and sections of a Markdown document, for the tests that run documentation as
written."""

from __future__ import annotations

import re
from pathlib import Path

_FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```$", re.M | re.S)


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(info string, body) of every fenced block, in order."""
    return [(m.group("info").strip(), m.group("body")) for m in _FENCE.finditer(text)]


def block_starting(path: Path, start: str) -> str:
    """The one block of the document whose text starts with `start` (a `# site.py:` marker comment)."""
    found = [body for _, body in code_blocks(path.read_text(encoding="utf-8")) if body.startswith(start)]
    assert len(found) == 1, f"{path.name}: {len(found)} code blocks start with {start!r}"
    return found[0]


def section(path: Path, heading: str) -> str:
    """The text under `heading` up to the next heading of its level or above (`#` lines inside code
    blocks are comments, not headings)."""
    level = len(heading) - len(heading.lstrip("#"))
    lines, found, fenced = path.read_text(encoding="utf-8").splitlines(keepends=True), [], False
    for line in lines:
        fenced ^= line.startswith("```")
        is_heading = not fenced and re.match(rf"#{{1,{level}}} ", line) is not None
        if found and is_heading:
            break
        if found or line.rstrip("\n") == heading:
            found.append(line)
    assert found, f"{path.name} has no heading {heading!r}"
    return "".join(found)
