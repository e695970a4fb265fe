-- 0015_event_log_partitions.sql - event_log partitioned by month, so that
-- old months leave the database whole (`axctl db maintain` detaches them,
-- `axctl db archive` writes them to files), and the functions that
-- retention and archive of the instance history (dag_runs,
-- task_instances, attempts) use.
--
-- Why event_log only. event_log is the largest history table (about four
-- rows per instance), append-only, and nothing references it, so a month
-- of it can leave as one partition. The instance tables stay plain
-- tables: on PostgreSQL 15 a foreign key that references a partitioned
-- table is checked through the partitioned parent (20,000 task_instances
-- inserts took 15.6-21.7 s against 4.1-7.0 s), and every update or
-- look-up by id alone (the pipeline's hot path) probes each month's
-- index; partitioning them made every instance 5-7x slower. Their old
-- rows leave by run, in batches (ax_history_delete_runs, and
-- engine/history.c's archive), which the ON DELETE CASCADE keys already
-- support: a run takes its instances and their attempts with it.
--
-- Keys. PostgreSQL enforces a unique constraint of a partitioned table
-- only when it holds the partition key, so the primary key becomes
-- (id, time) and the envelope key (event_id, time). Ids still come from
-- the one identity sequence (GENERATED ALWAYS; the conversion keeps every
-- id and continues the sequence after the old one), so id stays globally
-- unique and ascending in insert order: the events page's and `axctl
-- events --follow`'s cursor (`id > cursor`) work as before. A re-sent
-- event carries its envelope's id and time, so ON CONFLICT (event_id,
-- time) and the COPY path's look-up of known ids keep re-sends no-ops.
--
-- Partitions are whole UTC months named event_log_pYYYYMM, plus a DEFAULT
-- partition event_log_default so that an insert never fails: an event
-- time no month covers lands there. ax_history_ensure creates the months
-- ahead; it runs at the end of this migration, on every migrate / `db up`
-- / standalone start (engine/migrate.c), on every `axctl db maintain`,
-- and axd runs it hourly. A month whose rows already sit in the default
-- partition is not created (PostgreSQL would refuse): WARNING, the rows
-- stay in the default partition.
--
-- The append-only triggers refuse UPDATE, DELETE and TRUNCATE of rows as
-- before; detaching and dropping a month is the only way rows leave.

-- Partition helpers -----------------------------------------------------

-- Creates the month partition of event_log for the UTC month that starts
-- on m, unless it exists. Returns true when it created one. When the
-- default partition already holds rows of that month, PostgreSQL refuses
-- the partition: not created (WARNING), false returned.
CREATE FUNCTION ax_part_create(parent text, m date) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	first date := date_trunc('month', m)::date;
	name  text := parent || '_p' || to_char(first, 'YYYYMM');
	lo    timestamptz := first::timestamp AT TIME ZONE 'UTC';
	hi    timestamptz := (first + interval '1 month')::timestamp
	                     AT TIME ZONE 'UTC';
BEGIN
	IF parent IS DISTINCT FROM 'event_log' THEN
		RAISE EXCEPTION '% is not a partitioned history table', parent
			USING HINT = 'event_log is partitioned by month; dag_runs, '
			             'task_instances and attempts are plain tables';
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

-- Creates the month partitions of event_log from the current UTC month
-- through `ahead` months later (0..120). Returns how many it created.
-- Idempotent; safe beside the scheduler (a brief lock on the parent).
CREATE FUNCTION ax_history_ensure(ahead integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	cur date := date_trunc('month', now() AT TIME ZONE 'UTC')::date;
	n   integer := 0;
BEGIN
	IF ahead IS NULL OR ahead < 0 OR ahead > 120 THEN
		RAISE EXCEPTION 'months ahead must be 0..120, not %', ahead;
	END IF;
	FOR i IN 0 .. ahead LOOP
		IF ax_part_create('event_log',
		                  (cur + make_interval(months => i))::date) THEN
			n := n + 1;
		END IF;
	END LOOP;
	RETURN n;
END
$$;

-- The month partitions of event_log, attached (schema public) or detached
-- and not yet archived (schema ax_archive), with the UTC month each
-- holds. The default partition is not listed.
CREATE FUNCTION ax_history_partitions()
RETURNS TABLE (parent text, part text, detached boolean,
               month_start timestamptz, month_end timestamptz)
LANGUAGE sql STABLE AS $$
SELECT m[1], c.relname::text, n.nspname = 'ax_archive',
       to_date(m[2], 'YYYYMM')::timestamp AT TIME ZONE 'UTC',
       (to_date(m[2], 'YYYYMM') + interval '1 month')::timestamp
           AT TIME ZONE 'UTC'
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
CROSS JOIN LATERAL regexp_match(c.relname, '^(event_log)_p([0-9]{6})$') m
WHERE c.relkind = 'r' AND n.nspname IN ('public', 'ax_archive')
  AND m IS NOT NULL
  AND (n.nspname = 'ax_archive' OR c.relispartition)
ORDER BY 4
$$;

-- Detaches every month of event_log that ends at or before `before` into
-- the schema ax_archive (the rows stay in the database until `axctl db
-- archive` writes and drops them) and returns the names, oldest first.
-- DETACH locks event_log ACCESS EXCLUSIVE for milliseconds (no rows are
-- read or copied); the caller should set lock_timeout.
CREATE FUNCTION ax_history_detach(before timestamptz)
RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
	p record;
BEGIN
	IF before IS NULL THEN
		RAISE EXCEPTION 'the archive limit is NULL'
			USING HINT = 'give a date, e.g. 2026-01-01';
	END IF;
	FOR p IN SELECT * FROM ax_history_partitions() h
	         WHERE NOT h.detached AND h.month_end <= before ORDER BY 4
	LOOP
		EXECUTE format('ALTER TABLE public.event_log DETACH PARTITION '
		               'public.%I', p.part);
		EXECUTE format('ALTER TABLE public.%I SET SCHEMA ax_archive',
		               p.part);
		RETURN NEXT p.part;
	END LOOP;
END
$$;

-- The instance history that may leave: up to `batch` runs whose
-- logical_date is before `before` and that are finished (SUCCESS, FAILED
-- or CANCELED) with no unfinished instance or attempt, oldest (lowest id)
-- first, locked FOR UPDATE (runs another transaction holds are skipped:
-- they are in use). Retention deletes them, archive writes them to files
-- first (engine/history.c).
CREATE FUNCTION ax_history_old_runs(before timestamptz, batch integer)
RETURNS SETOF bigint
LANGUAGE sql AS $$
SELECT r.id FROM dag_runs r
WHERE r.logical_date < before
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

-- Retention of the instance history: deletes one batch of
-- ax_history_old_runs; their instances and attempts go with them (ON
-- DELETE CASCADE). Returns how many runs it deleted; call it until it
-- returns 0, one transaction per call, so that no transaction holds more
-- than `batch` runs' locks and WAL.
CREATE FUNCTION ax_history_delete_runs(before timestamptz, batch integer)
RETURNS integer
LANGUAGE sql AS $$
WITH d AS (
	DELETE FROM dag_runs
	WHERE id IN (SELECT ax_history_old_runs(before, batch))
	RETURNING 1)
SELECT count(*)::integer FROM d
$$;

CREATE SCHEMA ax_archive;

-- The conversion -----------------------------------------------------------

-- The old table steps aside with its indexes, triggers and identity
-- sequence; its name is free for the new one.
CREATE SCHEMA ax_migrate_0015;
ALTER TABLE event_log SET SCHEMA ax_migrate_0015;

CREATE TABLE event_log (
	id          bigint GENERATED ALWAYS AS IDENTITY,
	event_id    uuid NOT NULL, -- envelope id: re-sends are no-ops
	type        text NOT NULL,
	time        timestamptz NOT NULL DEFAULT now(),
	dag_id      bigint,   -- ids without foreign keys: the audit trail
	dag_run_id  bigint,   -- outlives the rows it talks about
	instance_id bigint,
	run_id      uuid,
	attempt     integer,
	trace_id    text,
	reason      text,
	payload     jsonb NOT NULL DEFAULT '{}',
	PRIMARY KEY (id, time),
	UNIQUE (event_id, time)
) PARTITION BY RANGE (time);

-- Row triggers and indexes of a partitioned table are cloned to every
-- partition, present and future. The indexes are those 0013 left.
CREATE TRIGGER event_log_append_only BEFORE UPDATE OR DELETE ON event_log
	FOR EACH ROW EXECUTE FUNCTION ax_refuse_change('append-only');
CREATE TRIGGER event_log_no_truncate BEFORE TRUNCATE ON event_log
	FOR EACH STATEMENT EXECUTE FUNCTION ax_refuse_change('append-only');

CREATE INDEX event_log_instance_idx ON event_log (instance_id, id)
	WHERE instance_id IS NOT NULL;
CREATE INDEX event_log_run_idx ON event_log (dag_run_id, id)
	WHERE dag_run_id IS NOT NULL;
CREATE INDEX event_log_time_idx ON event_log USING brin (time);

CREATE TABLE event_log_default PARTITION OF event_log DEFAULT;

-- A month partition for every month that has rows (before the rows come,
-- so that none lands in the default partition), then the months ahead.
SELECT count(*) FILTER (WHERE ax_part_create('event_log', m)) FROM (
	SELECT DISTINCT date_trunc('month', time AT TIME ZONE 'UTC')::date AS m
	FROM ax_migrate_0015.event_log WHERE isfinite(time)
	ORDER BY 1) months;

SELECT ax_history_ensure(3);

INSERT INTO event_log (id, event_id, type, time, dag_id, dag_run_id,
                       instance_id, run_id, attempt, trace_id, reason,
                       payload)
OVERRIDING SYSTEM VALUE
SELECT id, event_id, type, time, dag_id, dag_run_id, instance_id, run_id,
       attempt, trace_id, reason, payload
FROM ax_migrate_0015.event_log;

-- The sequence continues after the old one (not merely after the largest
-- id kept), so an id handed out once is never handed out again.
DO $$
DECLARE
	last bigint;
BEGIN
	EXECUTE format('SELECT CASE WHEN is_called THEN last_value ELSE '
	               'last_value - 1 END FROM %s',
	               pg_get_serial_sequence('ax_migrate_0015.event_log', 'id'))
		INTO last;
	SELECT greatest(last, coalesce(max(id), 0)) INTO last FROM event_log;
	IF last > 0 THEN
		PERFORM setval(pg_get_serial_sequence('event_log', 'id'), last);
	END IF;
END
$$;

DROP SCHEMA ax_migrate_0015 CASCADE;

ANALYZE event_log;
