"""The migrations and the present-tense schema, shipped inside the package as `signup_verification.sql`
(pyproject.toml maps this folder): numbered migrations (NNN_name.sql, applied once, never edited),
schema.sql, and README.md, which says how to write each. platform/migrations.py reads them through
importlib.resources, so `verifyctl migrate` works from any directory after `pip install .`.
This file only makes the folder an importable package.
"""
