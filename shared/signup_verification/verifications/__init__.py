"""Verifications: create, confirm and tokens, with their SQL (the verification state machine)."""
