"""The reconciler's explicit configuration: defaults, the variables that set them, their checks."""

from __future__ import annotations

import pytest

from signup_verification.config import ConfigError, load
from signup_verification.operations.config import ReconcilerConfig


def test_retention_windows_must_be_ordered():
    with pytest.raises(ConfigError):
        ReconcilerConfig(redact_after_seconds=90, purge_after_seconds=30)
    with pytest.raises(ConfigError):
        load({"RETENTION_REDACT_AFTER_DAYS": "10", "RETENTION_PURGE_AFTER_DAYS": "5"})
    config = load({"RECONCILE_BATCH_SIZE": "50", "RETENTION_PURGE_AFTER_DAYS": "365"}).reconciler
    assert (config.batch_size, config.purge_after_seconds) == (50, 365 * 86400)
