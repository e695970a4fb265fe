-- 0022_instance_history.sql - the instance history partitioned by month:
-- the task instances and attempts of finished runs leave the hot tables
-- for task_instances_history and attempts_history, partitioned by the
-- run's logical month, and old months leave the database whole
-- (`axctl db maintain` detaches them, `axctl db archive` writes them to
-- files), as event_log's months do since 0015.
--
-- Why two tables and not the hot ones partitioned. 0015 measured the hot
-- tables partitioned: every instance 5-7x slower (a foreign key that
-- references a partitioned table is checked through its parent, and a
-- look-up or update by id alone probes every month's index). So the
-- pipeline keeps writing and reading the plain tables, which now hold
-- only live runs and those that ended recently, and a batch move (axd
-- hourly, `axctl db maintain`) takes the rest out in large statements.
-- The hot tables stay small however long the history grows.
--
-- What moves. A run that is finished (SUCCESS, FAILED or CANCELED), with
-- no unfinished instance and no open attempt, that ended before the
-- mover's limit (history.hot_hours ago): all its instances and all their
-- attempts in one transaction, so a run's rows are either all hot or all
-- in history. dag_runs stays one plain table: its row stays and records
-- when its rows left (history_at), and its UNIQUE (dag_id, logical_date)
-- keeps guarding every period against a second run; since instances
-- are created only for a run, the instance key (dag_id, task,
-- logical_time, shard) stays unique across both tables.
--
-- Reading. task_instances_all and attempts_all are the hot rows and the
-- history together, with the hot tables' columns in their order: every
-- reader that may meet an old run (API pages, explain, cross-DAG waits,
-- reports) reads them; the pipeline's own statements, which only meet
-- live rows, read the hot tables.
--
-- Writing an old run again. A run whose rows are in history becomes
-- QUEUED or RUNNING again only through an UPDATE of dag_runs (a clear, a
-- re-run): a trigger brings its instances and attempts back to the hot
-- tables first, in the same transaction (ax_history_bring_back). Writers
-- that change an instance of a finished run without making the run
-- active (marking an instance) call ax_history_restore_run first.
--
-- Keys. The history tables' primary keys are (id, logical_time): a
-- unique constraint of a partitioned table must hold its partition key.
-- Ids come from the hot tables' identity sequences and are never handed
-- out twice, so id alone stays unique across hot and history.
--
-- A later migration that adds a column to task_instances or attempts
-- adds it to the history table too and recreates the view.

ALTER TABLE dag_runs ADD COLUMN history_at timestamptz;

-- The mover's scan: the finished runs still hot. A run enters it when it
-- finishes and leaves it when it moves, so it holds about
-- history.hot_hours of runs.
CREATE INDEX dag_runs_hot_done_idx ON dag_runs (id)
	WHERE history_at IS NULL AND state IN ('SUCCESS', 'FAILED', 'CANCELED');

CREATE TABLE task_instances_history (
	LIKE task_instances INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
	PRIMARY KEY (id, logical_time)
) PARTITION BY RANGE (logical_time);

-- The same look-ups as the hot table's: by run, by outcome for the list
-- pages (0020), by key for cross-DAG waits.
CREATE INDEX task_instances_history_run_idx
	ON task_instances_history (dag_run_id);
CREATE INDEX task_instances_history_outcome_idx
	ON task_instances_history (state, id);
CREATE INDEX task_instances_history_key_idx
	ON task_instances_history (dag_id, task, logical_time, shard);

CREATE TABLE task_instances_history_default
	PARTITION OF task_instances_history DEFAULT;

CREATE TABLE attempts_history (
	LIKE attempts INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
	logical_time timestamptz NOT NULL, -- its run's logical_date
	PRIMARY KEY (id, logical_time)
) PARTITION BY RANGE (logical_time);

CREATE INDEX attempts_history_instance_idx
	ON attempts_history (instance_id, number);
CREATE INDEX attempts_history_run_id_idx ON attempts_history (run_id);

CREATE TABLE attempts_history_default
	PARTITION OF attempts_history DEFAULT;

CREATE VIEW task_instances_all AS
	SELECT * FROM task_instances
	UNION ALL
	SELECT * FROM task_instances_history;

CREATE VIEW attempts_all AS
	SELECT * FROM attempts
	UNION ALL
	SELECT id, run_id, instance_id, number, state, worker_id, due_at,
	       admitted_at, dispatched_at, started_at, ended_at, exit_status,
	       log_path, reason, created_at, command
	FROM attempts_history;

-- Partition helpers, now for the three month-partitioned tables ---------

CREATE OR REPLACE FUNCTION ax_part_create(parent text, m date)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	first date := date_trunc('month', m)::date;
	name  text := parent || '_p' || to_char(first, 'YYYYMM');
	lo    timestamptz := first::timestamp AT TIME ZONE 'UTC';
	hi    timestamptz := (first + interval '1 month')::timestamp
	                     AT TIME ZONE 'UTC';
BEGIN
	IF parent IS NULL OR parent NOT IN ('event_log',
	                                    'task_instances_history',
	                                    'attempts_history') THEN
		RAISE EXCEPTION '% is not a partitioned history table', parent
			USING HINT = 'event_log, task_instances_history and '
			             'attempts_history are partitioned by month';
	END IF;
	IF to_regclass(format('public.%I', name)) IS NOT NULL THEN
		RETURN false;
	END IF;
	BEGIN
		EXECUTE format('CREATE TABLE public.%I PARTITION OF public.%I '
		               'FOR VALUES FROM (%L) TO (%L)', name, parent, lo, hi);
	EXCEPTION WHEN check_violation THEN
		RAISE WARNING 'partition % not created: %_default holds rows of '
		              'that month', name, parent
			USING HINT = 'they stay in the default partition';
		RETURN false;
	END;
	RETURN true;
END
$$;

-- Creates the month partitions of event_log and of the instance history
-- from the current UTC month through `ahead` months later (0..120), so
-- that the move rarely creates one (a creation locks its parent until
-- the move commits). Returns how many it created.
CREATE OR REPLACE FUNCTION ax_history_ensure(ahead integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	cur date := date_trunc('month', now() AT TIME ZONE 'UTC')::date;
	n   integer := 0;
	t   text;
BEGIN
	IF ahead IS NULL OR ahead < 0 OR ahead > 120 THEN
		RAISE EXCEPTION 'months ahead must be 0..120, not %', ahead;
	END IF;
	FOREACH t IN ARRAY ARRAY['event_log', 'task_instances_history',
	                         'attempts_history'] LOOP
		FOR i IN 0 .. ahead LOOP
			IF ax_part_create(t, (cur + make_interval(months => i))::date)
			THEN
				n := n + 1;
			END IF;
		END LOOP;
	END LOOP;
	RETURN n;
END
$$;

-- The month partitions of the three tables, attached (schema public) or
-- detached and not yet archived (schema ax_archive), and the runs set
-- aside with a detached month of the instance history
-- (ax_archive.dag_runs_pYYYYMM, listed as detached).
CREATE OR REPLACE FUNCTION ax_history_partitions()
RETURNS TABLE (parent text, part text, detached boolean,
               month_start timestamptz, month_end timestamptz)
LANGUAGE sql STABLE AS $$
SELECT m[1], c.relname::text, n.nspname = 'ax_archive',
       to_date(m[2], 'YYYYMM')::timestamp AT TIME ZONE 'UTC',
       (to_date(m[2], 'YYYYMM') + interval '1 month')::timestamp
           AT TIME ZONE 'UTC'
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
CROSS JOIN LATERAL regexp_match(c.relname,
	'^(event_log|task_instances_history|attempts_history|dag_runs)'
	'_p([0-9]{6})$') m
WHERE c.relkind = 'r' AND n.nspname IN ('public', 'ax_archive')
  AND m IS NOT NULL
  AND (n.nspname = 'ax_archive' OR c.relispartition)
ORDER BY 4, 1
$$;

-- Moves the partition public.part (detached already) into ax_archive;
-- when ax_archive holds a table of that name (a month detached again
-- before its archive ran), the rows join it.
CREATE FUNCTION ax_history_set_aside(part text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	IF to_regclass(format('ax_archive.%I', part)) IS NULL THEN
		EXECUTE format('ALTER TABLE public.%I SET SCHEMA ax_archive',
		               part);
	ELSE
		EXECUTE format('INSERT INTO ax_archive.%I SELECT * FROM '
		               'public.%I', part, part);
		EXECUTE format('DROP TABLE public.%I', part);
	END IF;
END
$$;

-- Detaches every month of event_log, task_instances_history and
-- attempts_history that ends at or before `before` into the schema
-- ax_archive (the rows stay in the database until `axctl db archive`
-- writes and drops them) and returns the names, oldest first. With a
-- month of the instance history, the runs of that month whose rows are
-- in history leave dag_runs for ax_archive.dag_runs_pYYYYMM, in the same
-- transaction. DETACH locks the parent ACCESS EXCLUSIVE for milliseconds
-- (no rows are read or copied); the caller should set lock_timeout.
CREATE OR REPLACE FUNCTION ax_history_detach(before timestamptz)
RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
	p    record;
	runs text;
BEGIN
	IF before IS NULL THEN
		RAISE EXCEPTION 'the archive limit is NULL'
			USING HINT = 'give a date, e.g. 2026-01-01';
	END IF;
	FOR p IN SELECT * FROM ax_history_partitions() h
	         WHERE NOT h.detached AND h.month_end <= before
	         ORDER BY h.month_start, h.parent
	LOOP
		EXECUTE format('ALTER TABLE public.%I DETACH PARTITION '
		               'public.%I', p.parent, p.part);
		PERFORM ax_history_set_aside(p.part);
		-- the month's attempts left before (attempts_history sorts
		-- first), its instances just now: its runs follow, without
		-- the per-row trigger that deletes a run's history rows
		IF p.parent = 'task_instances_history' THEN
			runs := 'dag_runs_p' || to_char(p.month_start AT TIME ZONE 'UTC',
			                                'YYYYMM');
			IF to_regclass(format('ax_archive.%I', runs)) IS NULL THEN
				EXECUTE format('CREATE TABLE ax_archive.%I (LIKE '
				               'public.dag_runs)', runs);
			END IF;
			PERFORM set_config('ax.history_detach', 'on', true);
			EXECUTE format('WITH d AS (DELETE FROM public.dag_runs '
			               'WHERE history_at IS NOT NULL AND '
			               'logical_date >= %L AND logical_date < %L '
			               'RETURNING *) INSERT INTO ax_archive.%I '
			               'SELECT * FROM d',
			               p.month_start, p.month_end, runs);
			PERFORM set_config('ax.history_detach', 'off', true);
		END IF;
		RETURN NEXT p.part;
		IF p.parent = 'task_instances_history' THEN
			RETURN NEXT runs;
		END IF;
	END LOOP;
END
$$;

-- Retention and archive by run (engine/history.c) take the old runs whose
-- rows are still hot; the ones in history leave with their month.
CREATE OR REPLACE FUNCTION ax_history_old_runs(before timestamptz,
                                               batch integer)
RETURNS SETOF bigint
LANGUAGE sql AS $$
SELECT r.id FROM dag_runs r
WHERE r.logical_date < before
  AND r.history_at IS NULL
  AND r.state IN ('SUCCESS', 'FAILED', 'CANCELED')
  AND NOT EXISTS (
	SELECT 1 FROM task_instances ti
	WHERE ti.dag_run_id = r.id
	  AND ti.state IN ('PENDING', 'READY', 'RUNNING', 'UNKNOWN'))
  AND NOT EXISTS (
	SELECT 1 FROM task_instances ti
	JOIN attempts a ON a.instance_id = ti.id
	WHERE ti.dag_run_id = r.id
	  AND a.state IN ('QUEUED', 'DISPATCHED', 'RUNNING', 'UNKNOWN'))
ORDER BY r.id LIMIT greatest(batch, 1)
FOR UPDATE OF r SKIP LOCKED
$$;

-- The move --------------------------------------------------------------

-- Moves one batch: up to `batch` finished runs that ended before
-- `ended_before`, whose logical date is at or after `logical_from` (older
-- ones are retention's to delete), with no unfinished instance and no
-- open attempt, oldest first, locked FOR UPDATE SKIP LOCKED (a run
-- another transaction holds is in use: the next batch takes it). Their
-- instances and attempts go to the history tables (the months they need
-- are created first, so no row lands in a default partition) and leave
-- the hot tables; each run's history_at is set. Returns how many runs
-- moved: call it until it returns 0, one transaction per call.
CREATE FUNCTION ax_history_move(ended_before timestamptz,
                                logical_from timestamptz, batch integer)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	ids bigint[];
	m   date;
BEGIN
	SELECT array_agg(id) INTO ids FROM (
		SELECT r.id FROM dag_runs r
		WHERE r.history_at IS NULL
		  AND r.state IN ('SUCCESS', 'FAILED', 'CANCELED')
		  AND r.ended_at < ended_before
		  AND r.logical_date >= logical_from
		  AND NOT EXISTS (
			SELECT 1 FROM task_instances ti
			WHERE ti.dag_run_id = r.id
			  AND ti.state IN ('PENDING', 'READY', 'RUNNING', 'UNKNOWN'))
		  AND NOT EXISTS (
			SELECT 1 FROM task_instances ti
			JOIN attempts a ON a.instance_id = ti.id
			WHERE ti.dag_run_id = r.id
			  AND a.state IN ('QUEUED', 'DISPATCHED', 'RUNNING',
			                  'UNKNOWN'))
		ORDER BY r.id LIMIT greatest(batch, 1)
		FOR UPDATE OF r SKIP LOCKED) x;
	IF ids IS NULL THEN
		RETURN 0;
	END IF;
	FOR m IN SELECT DISTINCT date_trunc('month',
	                                    logical_date AT TIME ZONE 'UTC')::date
	         FROM dag_runs WHERE id = ANY (ids)
	LOOP
		PERFORM ax_part_create('task_instances_history', m);
		PERFORM ax_part_create('attempts_history', m);
	END LOOP;
	INSERT INTO attempts_history
	SELECT a.*, ti.logical_time
	FROM attempts a JOIN task_instances ti ON ti.id = a.instance_id
	WHERE ti.dag_run_id = ANY (ids);
	INSERT INTO task_instances_history
	SELECT * FROM task_instances WHERE dag_run_id = ANY (ids);
	-- attempts go with their instances (ON DELETE CASCADE)
	DELETE FROM task_instances WHERE dag_run_id = ANY (ids);
	UPDATE dag_runs SET history_at = now() WHERE id = ANY (ids);
	RETURN cardinality(ids);
END
$$;

-- Brings the rows of run `run` (logical date `lt`) back from history to
-- the hot tables, ids and all. Does not touch dag_runs: the trigger below
-- calls it for the row it is updating.
CREATE FUNCTION ax_history_bring_back(run bigint, lt timestamptz)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO task_instances OVERRIDING SYSTEM VALUE
	SELECT * FROM task_instances_history
	WHERE dag_run_id = run AND logical_time = lt;
	INSERT INTO attempts OVERRIDING SYSTEM VALUE
	SELECT id, run_id, instance_id, number, state, worker_id, due_at,
	       admitted_at, dispatched_at, started_at, ended_at, exit_status,
	       log_path, reason, created_at, command
	FROM attempts_history
	WHERE logical_time = lt
	  AND instance_id IN (SELECT id FROM task_instances_history
	                      WHERE dag_run_id = run AND logical_time = lt);
	DELETE FROM attempts_history
	WHERE logical_time = lt
	  AND instance_id IN (SELECT id FROM task_instances_history
	                      WHERE dag_run_id = run AND logical_time = lt);
	DELETE FROM task_instances_history
	WHERE dag_run_id = run AND logical_time = lt;
END
$$;

-- Brings run `run`'s rows back to the hot tables if they are in history
-- (locking the run first, so the mover cannot take it meanwhile): for a
-- writer about to change an instance of a finished run. Returns true
-- when it brought rows back. A run whose month left the database (its
-- dag_runs row is gone) is not found: false.
CREATE FUNCTION ax_history_restore_run(run bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	lt timestamptz;
BEGIN
	SELECT logical_date INTO lt FROM dag_runs
	WHERE id = run AND history_at IS NOT NULL FOR UPDATE;
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	PERFORM ax_history_bring_back(run, lt);
	UPDATE dag_runs SET history_at = NULL WHERE id = run;
	RETURN true;
END
$$;

-- A run made QUEUED or RUNNING again brings its rows back first; a run
-- deleted takes its history rows with it (what ON DELETE CASCADE does
-- for the hot rows), except when ax_history_detach moves a detached
-- month's runs aside (their rows left with the month).
CREATE FUNCTION ax_history_run_reactivate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM ax_history_bring_back(OLD.id, OLD.logical_date);
	NEW.history_at := NULL;
	RETURN NEW;
END
$$;

CREATE TRIGGER dag_runs_history_back BEFORE UPDATE ON dag_runs
	FOR EACH ROW
	WHEN (OLD.history_at IS NOT NULL AND NEW.state IN ('QUEUED', 'RUNNING'))
	EXECUTE FUNCTION ax_history_run_reactivate();

CREATE FUNCTION ax_history_run_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	DELETE FROM attempts_history
	WHERE logical_time = OLD.logical_date
	  AND instance_id IN (SELECT id FROM task_instances_history
	                      WHERE dag_run_id = OLD.id
	                        AND logical_time = OLD.logical_date);
	DELETE FROM task_instances_history
	WHERE dag_run_id = OLD.id AND logical_time = OLD.logical_date;
	RETURN OLD;
END
$$;

CREATE TRIGGER dag_runs_history_delete BEFORE DELETE ON dag_runs
	FOR EACH ROW
	WHEN (OLD.history_at IS NOT NULL AND
	      current_setting('ax.history_detach', true) IS DISTINCT FROM 'on')
	EXECUTE FUNCTION ax_history_run_delete();

SELECT ax_history_ensure(3);
