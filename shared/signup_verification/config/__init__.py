"""Every setting, read once from the environment into frozen configs, one per concern.

Each setting is declared once, on the field of the config it fills (platform/settings.py); each
package keeps its config types in its own light config.py. `load()` reads the whole tree with one
generic loader (loader.py: `sm://` Secret Manager references resolved, platform/secret_manager.py),
applies the checks across settings (checks.py), and raises one ConfigError listing every bad
setting with its reason, rather than stopping at the first. This is the only module that reads the
process environment (local/ emulates the platform and may too); it sits above every layer because
it builds all of them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..api.config import AuthConfig, DeliveryReportsConfig, HttpConfig, ReturnUrlConfig
from ..delivery.config import ChannelsConfig
from ..operations.config import DispatchConfig, ReconcilerConfig, SignalsConfig
from ..outbox.config import RetryPolicy
from ..platform.config import (
    DEPLOYMENT,
    ENVIRONMENT,
    FUNCTION_TARGET,
    LOCAL_DIR,
    DatabaseConfig,
    LoggingConfig,
    MigrationConfig,
    ShutdownConfig,
    Target,
)
from ..platform.errors import ConfigError
from ..platform.settings import part
from ..verifications.config import ConfirmConfig, CreateConfig, TokenConfig
from . import checks
from .loader import Reading

__all__ = ["Config", "ConfigError", "load"]


@dataclass(frozen=True)
class Config:
    environment: str = ENVIRONMENT.field()
    deployment: str = DEPLOYMENT.field()
    function_target: Target | None = FUNCTION_TARGET.field()  # which entry point this instance serves
    local_dir: Path = LOCAL_DIR.field()
    database: DatabaseConfig = part(DatabaseConfig)
    logging: LoggingConfig = part(LoggingConfig)
    shutdown: ShutdownConfig = part(ShutdownConfig)
    tokens: TokenConfig = part(TokenConfig)
    http: HttpConfig = part(HttpConfig)
    create: CreateConfig = part(CreateConfig)
    confirm: ConfirmConfig = part(ConfirmConfig)
    dispatch: DispatchConfig = part(DispatchConfig)
    retry: RetryPolicy = part(RetryPolicy)
    channels: ChannelsConfig = part(ChannelsConfig)
    reconciler: ReconcilerConfig = part(ReconcilerConfig)
    signals: SignalsConfig = part(SignalsConfig)
    auth: AuthConfig = part(AuthConfig)
    migrations: MigrationConfig = part(MigrationConfig)  # verifyctl migrate, verifyctl dev
    reports: DeliveryReportsConfig = part(DeliveryReportsConfig)  # the delivery_reports target
    return_url: ReturnUrlConfig = part(ReturnUrlConfig)  # where create's return_url may point

    @property
    def is_production(self) -> bool:
        return self.environment == "production"


def load(env: Mapping[str, str] | None = None) -> Config:
    """The whole configuration from `env` (default: the process environment), or one ConfigError
    whose message lists every invalid setting (`.problems`: one entry per setting)."""
    reading = Reading(os.environ if env is None else env)
    config = checks.across(reading.build(Config), reading)
    reading.raise_problems()
    return config
