INSERT INTO schema_definitions (name, checksum) VALUES (:name, :checksum)
ON CONFLICT (name) DO UPDATE SET checksum = EXCLUDED.checksum, applied_at = now()
