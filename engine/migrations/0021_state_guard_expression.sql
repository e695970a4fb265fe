-- 0021_state_guard_expression.sql - the state guard's WHEN clause is a
-- plain expression written out from the state machine, not a call of
-- ax_ti_move_ok.
--
-- 0013 moved the legality test into the trigger's WHEN clause, a call of
-- the SQL function ax_ti_move_ok that the planner inlines. A trigger's
-- WHEN clause is stored as written, though, and the executor prepares it
-- for each statement that fires the trigger: the inlining is done anew
-- each time, which parses and analyses the bodies of ax_ti_move_ok and of
-- the three ax_ti_move_legal calls inside it. The chain's single-row
-- moves paid that twice per edge (the admission's PENDING -> READY, the
-- result's RUNNING -> SUCCESS). Measured with build/tests/bench_state_guard
-- (tests/bench/bench_state_guard.c), a single-row RUNNING -> SUCCESS
-- update in its own transaction: median 433 us with that WHEN clause,
-- 335 us with the written-out one, 265 us with no guard at all.
--
-- ax_ti_guard_install() writes the WHEN clause from ax_ti_move_legal,
-- which stays the one SQL statement of the state machine (engine/state.c
-- holds the same table): a migration that replaces ax_ti_move_legal calls
-- it again. The test is the one ax_ti_move_ok made: the move is legal, or
-- it passes through RUNNING in one write that records the start
-- (started_at set anew). The guard's function still checks the move
-- itself and raises as before (P0001, same message, detail and hint). A
-- state missing from the list below only costs speed: its moves fail the
-- WHEN clause, so the guard's function runs and judges them by
-- ax_ti_move_legal as before 0013.
CREATE FUNCTION ax_ti_guard_install() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	states  text[] := ARRAY['PENDING', 'READY', 'RUNNING', 'SUCCESS',
	                        'FAILED', 'TIMEOUT', 'CANCELED', 'SKIPPED',
	                        'UNKNOWN'];
	f       text;
	to_list text;
	legal   text := '';
	via     text := '';
	run_to  text;
BEGIN
	-- CASE OLD.state WHEN f THEN NEW.state IN (targets of f) ... END
	FOREACH f IN ARRAY states LOOP
		SELECT string_agg(quote_literal(t), ', ' ORDER BY t)
		  INTO to_list
		  FROM unnest(states) AS t
		 WHERE coalesce(ax_ti_move_legal(f, t), false);
		IF to_list IS NOT NULL THEN
			legal := legal || format(' WHEN %L THEN NEW.state IN (%s)',
			                         f, to_list);
		END IF;
		IF coalesce(ax_ti_move_legal(f, 'RUNNING'), false) THEN
			via := via || CASE WHEN via = '' THEN '' ELSE ', ' END
			       || quote_literal(f);
		END IF;
	END LOOP;
	SELECT string_agg(quote_literal(t), ', ' ORDER BY t)
	  INTO run_to
	  FROM unnest(states) AS t
	 WHERE coalesce(ax_ti_move_legal('RUNNING', t), false);

	DROP TRIGGER IF EXISTS task_instances_state_guard ON task_instances;
	EXECUTE format(
	    'CREATE TRIGGER task_instances_state_guard '
	    'BEFORE UPDATE ON task_instances FOR EACH ROW '
	    'WHEN (OLD.state IS DISTINCT FROM NEW.state AND NOT coalesce('
	    '(CASE OLD.state%s ELSE false END) '
	    'OR (OLD.state IN (%s) AND NEW.state IN (%s) '
	    'AND NEW.started_at IS NOT NULL '
	    'AND NEW.started_at IS DISTINCT FROM OLD.started_at), false)) '
	    'EXECUTE FUNCTION ax_ti_state_guard()',
	    legal, coalesce(nullif(via, ''), 'NULL'),
	    coalesce(run_to, 'NULL'));
END
$$;

SELECT ax_ti_guard_install();

DROP FUNCTION ax_ti_move_ok(text, text, timestamptz, timestamptz);
