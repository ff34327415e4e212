-- Custom plans for a second connection of a dispatch invocation (see heartbeat_start_dispatch.sql).
SELECT set_config('plan_cache_mode', 'force_custom_plan', false)
