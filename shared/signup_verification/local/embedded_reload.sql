SELECT pg_reload_conf()
