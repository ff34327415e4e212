"""The Cloud SQL Python Connector's stand-in, inside the rehearsal's virtualenv only (never in the bundle).

tools/rehearse_deploy.py copies this file into the rehearsal venv's site-packages with a `.pth` line
that imports it at interpreter start. It does nothing unless REHEARSAL_CLOUDSQL names an emulated
instance (`{"instance": "project:region:name", "ip_types": [...], "socket": "...", "log": "..."}`,
rehearsal_cloudsql.py).
Then, as soon as the bundle's `signup_verification.platform.cloudsql` is imported, it fills that
module's seam (`use_factory`) with a connector that answers the call the real one answers:
`connect(instance, "pg8000", user=..., db=..., enable_iam_auth=True, ...)`, the user name formatted by
the real library's own `format_database_user` (a service account's email loses
".gserviceaccount.com"; a person's stays whole), a pg8000 DB-API connection back. It refuses what
Cloud SQL would refuse here: another instance, another driver, a login without IAM authentication,
an address the instance does not have (`ip_type`, read with the real library's `IPTypes`).
Each connection is logged (process, Cloud Run service or job, user) for the rehearsal's checks.
Standard library, pg8000 and the connector's utils only: what the bundle's requirements install.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
import threading
from typing import Any

SEAM = "signup_verification.platform.cloudsql"
DATABASE_VERSION = "POSTGRES_16"  # infra/database.tf


class Connector:
    def __init__(self, setting: dict[str, str]):
        self.setting = setting
        self._lock = threading.Lock()

    def connect(self, instance_connection_string: str, driver: str, **kwargs: Any) -> Any:
        import pg8000.dbapi
        from google.cloud.sql.connector.utils import format_database_user

        if instance_connection_string != self.setting["instance"]:
            raise ValueError(f"no Cloud SQL instance {instance_connection_string!r} here")
        if driver != "pg8000":
            raise ValueError(f"driver {driver!r}: the bundle's connector dials with pg8000")
        if not kwargs.pop("enable_iam_auth", False):
            raise PermissionError("the instance accepts IAM database authentication only (no passwords exist)")
        from google.cloud.sql.connector import IPTypes

        ip_type = IPTypes._from_str(kwargs.pop("ip_type", "public")).name.lower()
        if ip_type not in self.setting["ip_types"]:
            raise ConnectionError(f"instance {instance_connection_string!r} has no {ip_type} IP address")
        user = format_database_user(DATABASE_VERSION, kwargs.pop("user"))
        who = os.environ.get("K_SERVICE") or os.environ.get("CLOUD_RUN_JOB") or "verifyctl"
        with self._lock, open(self.setting["log"], "a", encoding="utf-8") as log:
            log.write(json.dumps({"pid": os.getpid(), "who": who, "user": user}) + "\n")
        return pg8000.dbapi.connect(user, database=kwargs.pop("db"), unix_sock=self.setting["socket"], **kwargs)

    def close(self) -> None:
        pass


class _FillSeam(importlib.abc.MetaPathFinder):
    """Loads the seam module as usual, then hands it this connector."""

    def __init__(self, setting: dict[str, str]):
        self.setting = setting

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != SEAM:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader, setting = spec.loader, self.setting
        execute = loader.exec_module

        def exec_module(module: Any) -> None:
            execute(module)
            module.use_factory(lambda: Connector(setting))

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install() -> None:
    setting = os.environ.get("REHEARSAL_CLOUDSQL")
    if setting:
        sys.meta_path.insert(0, _FillSeam(json.loads(setting)))


install()
