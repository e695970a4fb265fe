-- 0017_preempted_requeue.sql - a preempted instance goes back to PENDING
-- without using up a try.
--
-- The queue may stop a running preemptible attempt so that an attempt of
-- a higher tier gets its slot (engine/preempt.h). The stopped attempt
-- ends CANCELED with reason PREEMPTED; its instance moves RUNNING ->
-- PENDING (reason PREEMPTED) and is ready again after a jittered delay,
-- like a retry. A preemption is the scheduler's choice, not the task's
-- failure, so it must not consume one of the task's retries: the same
-- write raises max_tries by one. The C table (engine/state.c) has the
-- same new move.
CREATE OR REPLACE FUNCTION ax_ti_move_legal(f text, t text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT CASE f
	WHEN 'PENDING'  THEN t IN ('READY', 'CANCELED', 'SKIPPED')
	WHEN 'READY'    THEN t IN ('RUNNING', 'CANCELED')
	WHEN 'RUNNING'  THEN t IN ('SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELED',
	                           'UNKNOWN', 'PENDING')
	WHEN 'SUCCESS'  THEN t = 'PENDING'
	WHEN 'FAILED'   THEN t = 'PENDING'
	WHEN 'TIMEOUT'  THEN t = 'PENDING'
	WHEN 'CANCELED' THEN t = 'PENDING'
	WHEN 'SKIPPED'  THEN t = 'PENDING'
	WHEN 'UNKNOWN'  THEN t IN ('READY', 'SUCCESS', 'FAILED')
	ELSE false
END
$$;

CREATE FUNCTION ax_ti_preempted_try() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	NEW.max_tries := OLD.max_tries + 1;
	RETURN NEW;
END
$$;

-- Fires before the state guard (triggers run in name order).
CREATE TRIGGER task_instances_preempted_try BEFORE UPDATE ON task_instances
	FOR EACH ROW WHEN (OLD.state IN ('READY', 'RUNNING')
	                   AND NEW.state = 'PENDING'
	                   AND NEW.reason IS NOT DISTINCT FROM 'PREEMPTED')
	EXECUTE FUNCTION ax_ti_preempted_try();
