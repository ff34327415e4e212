"""The reconciler's explicit configuration: every knob, its default, and the variable that sets it.

River's rescuer model: defaults that are safe for a service nobody has tuned yet, each overridable.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping

from ...outbox.policy import RetryPolicy
from ...platform.settings import ConfigError
from ...platform.settings import _float as _number  # one parser for numeric settings

DAY = 86_400


@dataclass(frozen=True)
class ReconcilerConfig:
    # Bounded batches: each statement moves at most batch_size rows, each duty runs at most
    # max_batches statements per run; what is left is picked up by the next run (and reported).
    batch_size: int = 500
    max_batches: int = 20
    # Eligible work older than this means the worker is not keeping up or not running: the
    # scheduler fires once a minute and one invocation drains until its budget, so 2 minutes.
    polling_horizon_seconds: float = 120.0
    # Evidence retention (set by legal/security owners): the destination is removed from a
    # finished verification after redact_after_seconds; the verification, its intent and its
    # attempt history are deleted after purge_after_seconds (>= redact_after_seconds).
    redact_after_seconds: float = 30 * DAY
    purge_after_seconds: float = 90 * DAY
    # Stop starting batches when this much of the function's time budget is left.
    safety_margin_seconds: float = 10.0
    policy: RetryPolicy = field(default_factory=RetryPolicy)

    def __post_init__(self) -> None:
        if self.purge_after_seconds < self.redact_after_seconds:
            raise ConfigError("RETENTION_PURGE_AFTER_DAYS must be >= RETENTION_REDACT_AFTER_DAYS "
                              "(history is redacted first, then purged)")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, policy: RetryPolicy | None = None) -> "ReconcilerConfig":
        """RECONCILE_BATCH_SIZE, RECONCILE_MAX_BATCHES, POLLING_HORIZON_SECONDS,
        RETENTION_REDACT_AFTER_DAYS, RETENTION_PURGE_AFTER_DAYS, RECONCILE_SAFETY_MARGIN_SECONDS,
        and the retry/ambiguity policy (Settings.retry_policy, the dispatcher's; else read from env)."""
        env = os.environ if env is None else env
        defaults = cls()
        if policy is None:
            try:
                policy = RetryPolicy.from_env(env)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        return cls(
            batch_size=int(_number(env, "RECONCILE_BATCH_SIZE", defaults.batch_size, 1)),
            max_batches=int(_number(env, "RECONCILE_MAX_BATCHES", defaults.max_batches, 1)),
            polling_horizon_seconds=_number(env, "POLLING_HORIZON_SECONDS", defaults.polling_horizon_seconds, 1),
            redact_after_seconds=_number(env, "RETENTION_REDACT_AFTER_DAYS",
                                         defaults.redact_after_seconds / DAY, 0) * DAY,
            purge_after_seconds=_number(env, "RETENTION_PURGE_AFTER_DAYS",
                                        defaults.purge_after_seconds / DAY, 0) * DAY,
            safety_margin_seconds=_number(env, "RECONCILE_SAFETY_MARGIN_SECONDS",
                                          defaults.safety_margin_seconds, 0),
            policy=policy,
        )
