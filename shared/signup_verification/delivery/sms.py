"""SMS encoding and segmentation (GSM 03.38 / 3GPP TS 23.038), as carriers and Twilio count them.

GSM-7: 160 septets in one segment, 153 per part of a concatenated message (the rest of each part
carries the concatenation header). The extension characters cost two septets (escape + char) and
are never split across parts. One character outside the GSM-7 sets switches the whole message to
UCS-2: 70 UTF-16 code units in one segment, 67 per part; a character outside the BMP (an emoji)
is a surrogate pair, two units, also never split.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..platform.errors import ConfigError
from ..platform.timestamps import stated_minutes

if TYPE_CHECKING:
    from .config import MessageConfig

# The GSM 03.38 default alphabet, in code order (0x00-0x7F); '\x1b' is the escape to the extension table.
GSM7_BASIC = frozenset(
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞ\x1bÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
) - {"\x1b"}
# The extension table: each costs two septets.
GSM7_EXTENSION = frozenset("\f^{}\\[~]|€")

GSM7_SINGLE, GSM7_PART = 160, 153
UCS2_SINGLE, UCS2_PART = 70, 67


@dataclass(frozen=True)
class Encoding:
    name: str  # 'GSM-7' | 'UCS-2'
    units: int  # septets (GSM-7) or UTF-16 code units (UCS-2)
    segments: int


GSM7_ALL = GSM7_BASIC | GSM7_EXTENSION


def is_gsm7(text: str) -> bool:
    return GSM7_ALL.issuperset(text)


def _unit_costs(text: str, gsm: bool) -> list[int]:
    if gsm:
        return [2 if ch in GSM7_EXTENSION else 1 for ch in text]
    return [2 if ord(ch) > 0xFFFF else 1 for ch in text]


def _segments(costs: list[int], single: int, part: int) -> int:
    total = sum(costs)
    if total <= single:
        return 1 if total else 0
    segments, used = 1, 0
    for cost in costs:  # a two-unit character never straddles two parts
        if used + cost > part:
            segments, used = segments + 1, 0
        used += cost
    return segments


def encode_info(text: str) -> Encoding:
    gsm = is_gsm7(text)
    # The common case (one segment) counted in C: per-character lists cost ~10 us per SMS.
    units = (
        len(text) + sum(map(text.count, GSM7_EXTENSION)) if gsm else len(text.encode("utf-16-le", "surrogatepass")) // 2
    )
    if units <= (GSM7_SINGLE if gsm else UCS2_SINGLE):
        return Encoding("GSM-7" if gsm else "UCS-2", units, 1 if units else 0)
    costs = _unit_costs(text, gsm)
    if gsm:
        return Encoding("GSM-7", sum(costs), _segments(costs, GSM7_SINGLE, GSM7_PART))
    return Encoding("UCS-2", sum(costs), _segments(costs, UCS2_SINGLE, UCS2_PART))


def non_gsm_characters(text: str) -> str:
    """The characters that force UCS-2 (for a template author's error message)."""
    return "".join(sorted({ch for ch in text if ch not in GSM7_BASIC and ch not in GSM7_EXTENSION}))


def render_body(version_ref: str, locale: str, config: MessageConfig, *, minutes: int, code: str) -> str:
    """An SMS as sent, ending with its autofill lines (MessageConfig.autofill): what the renderer
    sends and what the start-up check of the segment budget measures."""
    from . import templates  # the catalogue (jinja2): loaded where a message is rendered or checked

    return templates.render(
        version_ref,
        locale,
        "sms",
        product=config.product_name,
        minutes=minutes,
        code=code,
        autofill=config.autofill(code),
    )


def check_sms_budget(config: MessageConfig, ttl_seconds: int) -> None:
    """At start-up: PRODUCT_NAME in every SMS template x locale, with the longest code, the most
    minutes a message can state and the autofill lines (the app hash, the confirm host), stays within
    the template's segment budget (one non-GSM character such as '™' turns a GSM-7 SMS into UCS-2 and
    doubles its segments and its cost; a long host can push a message into a second segment)."""
    from . import templates  # the catalogue (jinja2): config/checks.py calls this at every target's start

    code, minutes = "0" * config.code_digits, stated_minutes(ttl_seconds)
    over = []
    for purpose in templates.purposes():
        for version in templates.versions(purpose):
            version_ref = f"{purpose}/{version}"
            for locale in templates.locales(version_ref):
                body = render_body(version_ref, locale, config, minutes=minutes, code=code)
                info, budget = encode_info(body), templates.load(version_ref, locale).sms_max_segments
                if info.segments > budget:
                    over.append(f"{version_ref}/{locale} {info.segments} {info.name} segments > {budget}")
    if over:
        odd = non_gsm_characters(config.product_name)
        raise ConfigError(
            f"PRODUCT_NAME={config.product_name!r} with the SMS's last line for {config.code_origin!r} "
            f"(VERIFY_LINK_BASE's host){' and SMS_APP_HASH' if config.sms_app_hash else ''} makes SMS exceed their "
            f"segment budget ({'; '.join(over)}){f': non-GSM characters {odd!r}' if odd else ''}"
        )
