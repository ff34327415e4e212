-- An applied migration whose comments were rewritten since (platform/migration_files.py): the
-- database records the file's current checksum.
UPDATE schema_migrations SET checksum = :checksum WHERE version = :version
