"""Constants every tier shares: the repository root and the token key the test services sign with."""

from __future__ import annotations

import base64
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEST_TOKEN_KEYS = "test-k1:" + base64.urlsafe_b64encode(b"k" * 32).decode().rstrip("=")
