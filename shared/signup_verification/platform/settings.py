"""Retired: configuration is built once by `signup_verification/config.py` into per-concern configs.

Only REPO_ROOT remains here, for platform/migrations.py until it loads its migrations as package
resources (issue 11, item 1).
"""
from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
