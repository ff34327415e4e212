"""Platform: configuration, the database, migrations, Cloud SQL, secrets, logging, shutdown.

The bottom layer: imports nothing else of the package."""
