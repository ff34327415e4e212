"""What the rendered messages say (PRODUCT_NAME, EMAIL_FROM, VERIFY_LINK_BASE, SMS_CODE_DIGITS) and
its start-up check, apart from the renderer (messages.py): config/ builds and checks it on every
target, which must not load the renderer, MIME or the outbox types for it (issue 18)."""

from __future__ import annotations

from dataclasses import dataclass
from email.utils import parseaddr

from ..platform.errors import ConfigError
from . import sms, templates


def message_domain(email_from: str) -> str:
    address = parseaddr(email_from)[1]
    return address.rpartition("@")[2] or "localhost"


@dataclass(frozen=True)
class MessageConfig:
    product_name: str = "Example"  # PRODUCT_NAME
    link_base: str = "http://localhost:8082/"  # VERIFY_LINK_BASE: the confirm page the link opens
    email_from: str = "Signup <no-reply@localhost>"  # EMAIL_FROM
    code_digits: int = 6  # SMS_CODE_DIGITS


def check_sms_budget(config: MessageConfig, ttl_seconds: int) -> None:
    """At start-up: PRODUCT_NAME in every SMS template x locale, with the longest code and the most
    minutes a message can state, stays within the template's segment budget (one non-GSM character
    such as '™' turns a GSM-7 SMS into UCS-2 and doubles its segments and its cost)."""
    code, minutes = "0" * config.code_digits, max(1, ttl_seconds // 60)
    over = []
    for purpose in templates.purposes():
        for version in templates.versions(purpose):
            version_ref = f"{purpose}/{version}"
            for locale in templates.locales(version_ref):
                body = templates.render(
                    version_ref, locale, "sms", product=config.product_name, minutes=minutes, code=code
                )
                info, budget = sms.encode_info(body), templates.load(version_ref, locale).sms_max_segments
                if info.segments > budget:
                    over.append(f"{version_ref}/{locale} {info.segments} {info.name} segments > {budget}")
    if over:
        odd = sms.non_gsm_characters(config.product_name)
        raise ConfigError(
            f"PRODUCT_NAME={config.product_name!r} makes SMS exceed their segment budget "
            f"({'; '.join(over)}){f': non-GSM characters {odd!r}' if odd else ''}"
        )
