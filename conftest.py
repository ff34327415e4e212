"""The repository's pytest entry: tests/support/fixtures.py's fixtures and options, and the tiers'
rules (tests/support/tiers.py), reach every tier under tests/ and functions/main_test.py (kept beside
main.py, as python-docs-samples do)."""
pytest_plugins = ["support.fixtures", "support.tiers"]
