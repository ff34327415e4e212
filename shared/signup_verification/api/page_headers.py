"""The headers every page is sent with (pages/), apart from the pages' renderer: api/edge.py puts
them on every target's HTTP errors, and must not load the pages, jinja's loader and confirm for that (cold start)."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

STYLE = (Path(__file__).resolve().parent / "pages" / "style.css").read_text(encoding="utf-8").strip()
_STYLE_HASH = base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()

SECURITY_HEADERS = {
    "Content-Type": "text/html; charset=utf-8",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": (
        f"default-src 'none'; style-src 'sha256-{_STYLE_HASH}'; form-action 'self'; "
        "base-uri 'none'; frame-ancestors 'none'"
    ),
}
