"""Test support: fixtures (registered for the whole repository by the root tests/support/fixtures.py), fakes that
speak the providers' real protocols, factories and helpers. Never imports a test module."""
