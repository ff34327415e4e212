"""Where `verifyctl dev` sends the service's webhooks, and which return URLs it allows.

By default both point at the demo signup site (demo_site.py): webhooks to its `/webhooks`, signed
with the development secret in <local dir>/dev-webhook-secret, and its origin allowed as a
`return_url`. Set WEBHOOK_URL to your own site's endpoint and they go there instead: the demo site
is not started (its sign-ups would never turn verified), and unless RETURN_URL_ALLOWED_ORIGINS is
set too, your endpoint's origin is the one allowed. A variable you set always wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..api.return_url import InvalidReturnUrl, origin_of
from .demo_site import SECRET_FILE, development_webhook_secret


@dataclass(frozen=True)
class Wiring:
    webhook_url: str | None  # None: no demo site and no WEBHOOK_URL, so webhooks are off
    demo_origin: str  # the demo site's origin, as a browser reaches it
    runs_demo: bool  # the webhooks come to the demo site, so it runs

    @classmethod
    def of(cls, env: Mapping[str, str], host: str, site_port: int | None, browser_host: str) -> Wiring:
        demo_url = f"http://{host}:{site_port}/webhooks" if site_port else None
        url = env.get("WEBHOOK_URL") or demo_url
        return cls(url, f"http://{browser_host}:{site_port}", demo_url is not None and url == demo_url)

    @property
    def allowed_origin(self) -> str | None:
        """The return-URL origin allowed by default: the demo site's, or your endpoint's."""
        if self.runs_demo:
            return self.demo_origin
        try:
            return origin_of(self.webhook_url, production=False) if self.webhook_url else None
        except InvalidReturnUrl:  # e.g. http to a host that is not this machine: no default then
            return None

    def service_settings(self, env: Mapping[str, str], local_dir: Path) -> dict[str, str]:
        """What the emulated functions get (a variable already set wins)."""
        if self.webhook_url is None:
            return {}
        settings = {
            "WEBHOOK_URL": self.webhook_url,
            "WEBHOOK_SECRET": env.get("WEBHOOK_SECRET") or development_webhook_secret(local_dir),
        }
        origins = env.get("RETURN_URL_ALLOWED_ORIGINS") or self.allowed_origin
        return {**settings, "RETURN_URL_ALLOWED_ORIGINS": origins} if origins else settings

    def describe(self, env: Mapping[str, str], local_dir: Path) -> list[tuple[str, str]]:
        """The banner's lines: where webhooks go, signed with which secret, and the allowed origins."""
        if self.webhook_url is None:
            return [("webhooks", "off (set WEBHOOK_URL to your site's endpoint: docs/integrate.md)")]
        whose = "the demo signup site's" if self.runs_demo else "WEBHOOK_URL"
        secret = "WEBHOOK_SECRET" if env.get("WEBHOOK_SECRET") else f"the secret in {Path(local_dir) / SECRET_FILE}"
        lines = [("webhooks", f"{self.webhook_url} <- {whose}; signed with {secret}")]
        origins = env.get("RETURN_URL_ALLOWED_ORIGINS") or self.allowed_origin
        if origins:
            lines.append(("return_url origins", f"{origins} <- RETURN_URL_ALLOWED_ORIGINS"))
        return lines
