INSERT INTO schema_migrations (version, name, checksum) VALUES (:version, :name, :checksum)
