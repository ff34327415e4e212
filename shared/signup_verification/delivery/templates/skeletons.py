"""A message part rendered once per (template, locale, part, other variables), the secret spliced in.

Jinja's `Template.render` builds a fresh context per call (a copy of the globals ChainMap), about
half of a ~15 us part; the dispatcher renders three parts per email, in threads that share the GIL
with the dispatch loop. Everything in a part but the secret (the link or the code) is the same for
every message of one product, locale and `minutes`, so the part is rendered once with a marker in
the secret's place and split there; a message is the pieces joined with the secret as Jinja would
have written it: `markupsafe.escape` under autoescape, `str` otherwise (no `finalize` is set).

That is exact only when the secret reaches the output solely as a bare `{{ name }}` at the top
level of the template: no filter, test, condition, loop, block, macro, `set` or autoescape scope
sees it. `secret_slots` proves that from the parsed template and answers None otherwise; such a
template (and any render error) takes the full render, which stays the reference (tests/unit/
test_template_skeletons.py compares both for every template, locale and part).
"""

from __future__ import annotations

import uuid

import jinja2
import markupsafe
from jinja2 import nodes

# Letters and digits only: escapes to itself and survives str(); random so no template contains it.
MARKER = f"SECRETSLOT{uuid.uuid4().hex}"
_SCOPED = (nodes.Extends, nodes.Block, nodes.Include, nodes.Import, nodes.FromImport)


def secret_slots(env: jinja2.Environment, source: str, name: str) -> int | None:
    """How many times the variable `name` is output as a bare top-level `{{ name }}` (0: the part
    does not use it, e.g. a subject), or None when it is used any other way."""
    tree = env.parse(source)
    if any(True for _ in tree.find_all(_SCOPED)):
        return None
    bare = {
        id(item)
        for node in tree.body
        if isinstance(node, nodes.Output)
        for item in node.nodes
        if isinstance(item, nodes.Name) and item.name == name and item.ctx == "load"
    }
    uses = [n for n in tree.find_all(nodes.Name) if n.name == name]
    if any(id(n) not in bare for n in uses):
        return None
    return len(uses)


def split(rendered: str, slots: int) -> tuple[str, ...] | None:
    """The part rendered with MARKER as the secret, cut at each slot (None: not exactly `slots` of them)."""
    pieces = tuple(rendered.split(MARKER))
    return pieces if len(pieces) == slots + 1 else None


def splice(pieces: tuple[str, ...], secret: str, autoescape: bool) -> str:
    value = str(markupsafe.escape(secret)) if autoescape else str(secret)
    return value.join(pieces)
