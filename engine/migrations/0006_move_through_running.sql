-- 0006_move_through_running.sql - a task instance may pass through
-- RUNNING in one row write.
--
-- A short task's start and result often reach the result handler in the
-- same batch. Writing READY -> RUNNING and then RUNNING -> SUCCESS costs
-- two non-HOT updates of the row (state is indexed); at thousands of
-- instances a second that second write was a measurable share of the
-- database's work. The result handler now writes READY -> SUCCESS (or
-- FAILED, TIMEOUT, CANCELED, UNKNOWN) once, with started_at set, and still
-- emits both events (instance.running, then the end).
--
-- The state machine does not change: the guard accepts OLD -> NEW when it
-- is a legal move, or when OLD -> RUNNING and RUNNING -> NEW are both
-- legal and the same write records the start (started_at set anew). A
-- writer cannot skip RUNNING without saying when the attempt started.
CREATE OR REPLACE FUNCTION ax_ti_state_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF NOT coalesce(ax_ti_move_legal(OLD.state, NEW.state), false)
	   AND NOT (coalesce(ax_ti_move_legal(OLD.state, 'RUNNING'), false)
	            AND coalesce(ax_ti_move_legal('RUNNING', NEW.state), false)
	            AND NEW.started_at IS NOT NULL
	            AND NEW.started_at IS DISTINCT FROM OLD.started_at) THEN
		RAISE EXCEPTION '% -> % is not a legal move', OLD.state, NEW.state
			USING ERRCODE = 'P0001',
			DETAIL = format('task instance %s', OLD.id),
			HINT = 'see the state machine in DESIGN.md section 3';
	END IF;
	RETURN NEW;
END
$$;
