"""The migrations, shipped inside the package as `signup_verification.sql` (pyproject.toml maps this folder).

Numbered, frozen migrations (NNN_name.sql: tables, indexes, triggers) and always-current definitions
(definitions/NN_name.sql: functions and views). platform/migrations.py reads them through
importlib.resources, so `verifyctl migrate` works from any directory after `pip install .`.
This file only makes the folder an importable package.
"""
