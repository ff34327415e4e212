"""Platform: the database, migrations, Cloud SQL, secrets, logging, shutdown, the invocation deadline,
ConfigError, and the way a setting is declared (settings.py; the configuration is read by
signup_verification/config/).

The bottom layer: imports nothing else of the package."""
