"""Platform: the database, migrations, Cloud SQL, secrets, logging, shutdown, the invocation deadline,
and ConfigError (configuration itself is read by signup_verification/config/).

The bottom layer: imports nothing else of the package."""
