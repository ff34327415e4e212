"""Confirm's settings, apart from confirming (confirm.py): config/ builds them on every target (issue 18)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConfirmConfig:
    code_digits: int = 6  # SMS_CODE_DIGITS: the shape a typed code must have
    product_name: str = "Example"  # PRODUCT_NAME: shown on the confirmation pages
    # CODE_FAILURES_PER_DESTINATION_PER_DAY: wrong codes per number across its verifications; then locked
    destination_failures_per_day: int = 10
