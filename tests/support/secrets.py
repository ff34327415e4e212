"""Test-only helper over platform/secret_manager.py (production resolves one setting at a time in config/)."""

from __future__ import annotations

from collections.abc import Mapping

from signup_verification.platform import secret_manager


def resolve_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of `env` with every `sm://` reference replaced by its secret's value."""
    return {name: secret_manager.resolve(name, value) for name, value in env.items()}
