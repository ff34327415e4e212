"""Masking of destinations for logs and operator views. Tokens and codes are never passed here:
they are never logged at all."""

from __future__ import annotations


def mask_email(address: str) -> str:
    local, sep, domain = address.rpartition("@")
    if not sep:
        return "***"
    return f"{local[:1]}***@{domain}"


def mask_phone(number: str) -> str:
    digits = number.lstrip("+")
    if len(digits) < 6:
        return "+***"
    # Country code prefix (first digit) and last four stay: '+1******4567'.
    return f"+{digits[:1]}{'*' * (len(digits) - 5)}{digits[-4:]}"


def mask_destination(channel: str, destination: str | None) -> str:
    if destination is None:
        return "[redacted]"
    return mask_email(destination) if channel == "email" else mask_phone(destination)
