-- 0014_history_partitions.sql - the history (dag_runs, task_instances,
-- attempts, event_log) partitioned by month, so that old months leave the
-- database whole (retention, `axctl db maintain`) and into files
-- (`axctl db archive`), and so that what stays is as large as the
-- retention window, not as old as the installation.
--
-- Partition keys, and why. PostgreSQL enforces a unique constraint of a
-- partitioned table only when it holds the partition key, so the key is
-- the column the identity of each row already contains:
--
--   dag_runs        RANGE (logical_date)  UNIQUE (dag_id, logical_date)
--   task_instances  RANGE (logical_time)  UNIQUE (dag_id, task,
--                                           logical_time, shard)
--   attempts        RANGE (logical_time)  UNIQUE (instance_id, number,
--                                           logical_time)
--   event_log       RANGE (time)          UNIQUE (event_id, time)
--
-- The instance key (dag, task, logical_time, shard) is enforced exactly as
-- before, so idempotent creation by ON CONFLICT is unchanged; likewise a
-- run per (dag, logical_date). A run, its instances and their attempts
-- share one logical time (an instance's logical_time is its run's
-- logical_date, and attempts now carry the logical_time of their
-- instance), so one month of history is one partition of each of the
-- three tables: the foreign keys become (dag_run_id, logical_time) ->
-- dag_runs (id, logical_date) and (instance_id, logical_time) ->
-- task_instances (id, logical_time) and never cross months, and a month
-- leaves as a whole. Because an instance id names one logical time,
-- UNIQUE (instance_id, number, logical_time) is the old
-- UNIQUE (instance_id, number): one attempt per number, which idempotent
-- attempt creation (ON CONFLICT DO NOTHING) relies on.
--
-- Primary keys become (id, logical time). Ids still come from one
-- identity sequence per table and are never reused; lookups by id alone
-- use the id-leading index of every partition (one probe per month kept).
-- run_id is unique per logical time: UNIQUE (run_id, logical_time). It is
-- not enforced across months (no column of an attempt's identity fixes
-- its month); run_ids are UUIDv7 made once per attempt (48-bit
-- millisecond + 74 random bits), so two equal ones would have to be drawn
-- in the same millisecond. Every lookup by run_id still finds one row.
-- event_id is unique per event time: a re-sent event carries its
-- envelope's id and time, so re-sends stay no-ops (ON CONFLICT, and the
-- emitter's lookup of known ids before COPY).
--
-- Partitions are whole UTC months named <table>_pYYYYMM, plus a DEFAULT
-- partition <table>_default so that an insert never fails: a logical
-- time no month partition covers (a backfill of a period older than the
-- months kept, a far-future manual run) lands there. ax_history_ensure
-- creates the months ahead of time; it runs at the end of this migration,
-- on every `axctl db migrate` / `axctl db up` / standalone start
-- (engine/migrate.c) and on every `axctl db maintain`. Rows in the default
-- partition are kept until removed by hand; a month whose rows already
-- sit in the default partition is not created (PostgreSQL would refuse),
-- and ax_history_ensure says so with a WARNING.
--
-- Old months leave in two steps. ax_history_detach(before) detaches every
-- month that ends at or before `before` into the schema ax_archive (the
-- rows stay in the database, AX no longer reads them); it refuses a month
-- that holds a run, instance or attempt that is not finished, since
-- archiving it would cut work in flight off from the scheduler. It holds
-- ACCESS EXCLUSIVE locks on the history tables while it detaches (no
-- rows are read or copied then, the unfinished check uses the partial
-- indexes), so the scheduler pauses for milliseconds. `axctl db archive`
-- then writes each table of ax_archive to a file and drops it; `axctl db
-- restore` brings a file back. Detaching and dropping a partition is the
-- only way rows leave event_log: the append-only triggers refuse UPDATE,
-- DELETE and TRUNCATE of the rows as before.
--
-- The conversion of an existing database copies every row into the new
-- tables (ids, and every column, unchanged) and drops the old ones; on a
-- large standalone home it runs for a few minutes (about a million rows
-- a minute).

-- Partition helpers -----------------------------------------------------

-- Creates the month partition of parent (a history table) for the UTC
-- month that starts on m, unless it exists. Returns true when it created
-- one. When the default partition already holds rows of that month,
-- PostgreSQL refuses the partition: the month is not created (WARNING),
-- the rows stay where they are, and false is returned.
CREATE FUNCTION ax_part_create(parent text, m date) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	first date := date_trunc('month', m)::date;
	name  text := parent || '_p' || to_char(first, 'YYYYMM');
	lo    timestamptz := first::timestamp AT TIME ZONE 'UTC';
	hi    timestamptz := (first + interval '1 month')::timestamp
	                     AT TIME ZONE 'UTC';
BEGIN
	IF parent NOT IN ('dag_runs', 'task_instances', 'attempts',
	                  'event_log') THEN
		RAISE EXCEPTION '% is not a history table', parent
			USING HINT = 'use dag_runs, task_instances, attempts or '
			             'event_log';
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
			USING HINT = 'they stay in the default partition; move them '
			             'by hand to archive that month';
		RETURN false;
	END;
	RETURN true;
END
$$;

-- Creates the month partitions of the four history tables from the
-- current UTC month through `ahead` months later (ahead >= 0). Returns how
-- many it created. Idempotent; safe to run concurrently with the
-- scheduler (creating a partition takes a brief lock on the parent).
CREATE FUNCTION ax_history_ensure(ahead integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	cur date := date_trunc('month', now() AT TIME ZONE 'UTC')::date;
	t   text;
	n   integer := 0;
BEGIN
	IF ahead IS NULL OR ahead < 0 OR ahead > 120 THEN
		RAISE EXCEPTION 'months ahead must be 0..120, not %', ahead;
	END IF;
	FOR i IN 0 .. ahead LOOP
		FOREACH t IN ARRAY ARRAY['dag_runs', 'task_instances', 'attempts',
		                         'event_log'] LOOP
			IF ax_part_create(t, (cur + make_interval(months => i))::date)
			THEN
				n := n + 1;
			END IF;
		END LOOP;
	END LOOP;
	RETURN n;
END
$$;

-- The month partitions of the history tables, attached (schema public)
-- or detached and not yet archived (schema ax_archive), with the UTC
-- month each holds. The default partitions are not listed.
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
CROSS JOIN LATERAL regexp_match(c.relname,
    '^(dag_runs|task_instances|attempts|event_log)_p([0-9]{6})$') m
WHERE c.relkind = 'r' AND n.nspname IN ('public', 'ax_archive')
  AND m IS NOT NULL
  AND (n.nspname = 'ax_archive' OR c.relispartition)
ORDER BY 4, array_position(ARRAY['dag_runs', 'task_instances',
                                 'attempts', 'event_log'], m[1])
$$;

-- Detaches one partition into ax_archive and drops the foreign keys it
-- carried (they point at the parents, whose rows of that month leave
-- with it).
CREATE FUNCTION ax_part_detach(parent text, part text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	fk text;
BEGIN
	EXECUTE format('ALTER TABLE public.%I DETACH PARTITION public.%I',
	               parent, part);
	FOR fk IN SELECT conname FROM pg_constraint
	          WHERE conrelid = format('public.%I', part)::regclass
	            AND contype = 'f' AND conparentid = 0
	LOOP
		-- dropping one also drops the clones it has per partition
		EXECUTE format('ALTER TABLE public.%I DROP CONSTRAINT IF EXISTS %I',
		               part, fk);
	END LOOP;
	EXECUTE format('ALTER TABLE public.%I SET SCHEMA ax_archive', part);
END
$$;

-- Detaches every month partition that ends at or before `before` into the
-- schema ax_archive and returns the detached names, oldest month first.
-- A month of dag_runs / task_instances / attempts that holds a run that
-- is QUEUED or RUNNING, an instance PENDING, READY, RUNNING or UNKNOWN, or
-- an attempt QUEUED, DISPATCHED, RUNNING or UNKNOWN is refused: with
-- strict it raises (P0001, nothing detached), without it the month is
-- skipped with a WARNING. The check runs under ACCESS EXCLUSIVE locks of
-- the history tables, so no row can become unfinished meanwhile; the
-- caller should set lock_timeout (a writer ahead of it holds the locks).
CREATE FUNCTION ax_history_detach(before timestamptz, strict boolean)
RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
	mon   record;
	p     record;
	busy  bigint;
	what  text;
	stuck text;
BEGIN
	IF before IS NULL THEN
		RAISE EXCEPTION 'the archive limit is NULL'
			USING HINT = 'give a date, e.g. 2026-01-01';
	END IF;
	IF NOT EXISTS (SELECT 1 FROM ax_history_partitions() h
	               WHERE NOT h.detached AND h.month_end <= before) THEN
		RETURN;
	END IF;
	-- DETACH locks each parent ACCESS EXCLUSIVE anyway; taking all four
	-- (with their partitions) at once, in one order, freezes every month
	-- before it is checked and keeps the locks from being upgraded.
	LOCK TABLE dag_runs, task_instances, attempts, event_log
		IN ACCESS EXCLUSIVE MODE;
	FOR mon IN SELECT DISTINCT h.month_start, h.month_end
	           FROM ax_history_partitions() h
	           WHERE NOT h.detached AND h.month_end <= before
	           ORDER BY 1
	LOOP
		stuck := NULL;
		FOR p IN SELECT * FROM ax_history_partitions() h
		         WHERE NOT h.detached AND h.month_start = mon.month_start
		           AND h.parent <> 'event_log'
		LOOP
			what := CASE p.parent
				WHEN 'dag_runs' THEN 'state IN (''QUEUED'', ''RUNNING'')'
				WHEN 'task_instances' THEN 'state IN (''PENDING'', '
				     '''READY'', ''RUNNING'', ''UNKNOWN'')'
				ELSE 'state IN (''QUEUED'', ''DISPATCHED'', ''RUNNING'', '
				     '''UNKNOWN'')' END;
			EXECUTE format('SELECT count(*) FROM public.%I WHERE %s',
			               p.part, what) INTO busy;
			IF busy > 0 THEN
				EXECUTE format('SELECT string_agg(id::text, '', '') FROM '
				               '(SELECT id FROM public.%I WHERE %s '
				               'ORDER BY id LIMIT 5) x', p.part, what)
					INTO what;
				stuck := coalesce(stuck || '; ', '') ||
				    format('%s %s unfinished (id %s%s)', busy,
				           CASE p.parent WHEN 'dag_runs' THEN 'runs'
				           WHEN 'task_instances' THEN 'instances'
				           ELSE 'attempts' END, what,
				           CASE WHEN busy > 5 THEN ', ...' ELSE '' END);
			END IF;
		END LOOP;
		IF stuck IS NOT NULL THEN
			IF strict THEN
				RAISE EXCEPTION 'history of % is not finished: %',
				    to_char(mon.month_start AT TIME ZONE 'UTC', 'YYYY-MM'),
				    stuck
					USING ERRCODE = 'P0001',
					DETAIL = 'a month leaves only when every run, instance '
					         'and attempt in it has finished; archiving it '
					         'would cut work in flight off from the '
					         'scheduler',
					HINT = 'let them finish, or kill or mark them '
					       '(axctl run kill, axctl instance mark), or '
					       'archive only earlier months (--before)';
			END IF;
			RAISE WARNING 'history of % kept: %',
			    to_char(mon.month_start AT TIME ZONE 'UTC', 'YYYY-MM'), stuck;
		ELSE
			-- referencing tables first: the foreign keys check the
			-- remaining rows when a referenced partition leaves
			FOR p IN SELECT * FROM ax_history_partitions() h
			         WHERE NOT h.detached
			           AND h.month_start = mon.month_start
			           AND h.parent <> 'event_log'
			         ORDER BY array_position(ARRAY['attempts',
			             'task_instances', 'dag_runs'], h.parent)
			LOOP
				PERFORM ax_part_detach(p.parent, p.part);
				RETURN NEXT p.part;
			END LOOP;
		END IF;
		FOR p IN SELECT * FROM ax_history_partitions() h
		         WHERE NOT h.detached AND h.month_start = mon.month_start
		           AND h.parent = 'event_log'
		LOOP
			PERFORM ax_part_detach(p.parent, p.part);
			RETURN NEXT p.part;
		END LOOP;
	END LOOP;
END
$$;

CREATE SCHEMA ax_archive;

-- The conversion -----------------------------------------------------------

-- The old tables step aside with their indexes, constraints, triggers and
-- identity sequences; their names are free for the new ones.
CREATE SCHEMA ax_migrate_0014;
ALTER TABLE event_log SET SCHEMA ax_migrate_0014;
ALTER TABLE attempts SET SCHEMA ax_migrate_0014;
ALTER TABLE task_instances SET SCHEMA ax_migrate_0014;
ALTER TABLE dag_runs SET SCHEMA ax_migrate_0014;

-- An instance's logical time is its run's logical date (every writer
-- copies it); the new foreign key relies on it, so a database where it
-- does not hold is refused with the rows that break it.
DO $$
DECLARE
	bad text;
BEGIN
	SELECT string_agg(format('instance %s (%s) of run %s (%s)', ti.id,
	                         ti.logical_time, r.id, r.logical_date), '; ')
	INTO bad
	FROM (SELECT ti.* FROM ax_migrate_0014.task_instances ti
	      JOIN ax_migrate_0014.dag_runs r ON r.id = ti.dag_run_id
	      WHERE ti.logical_time <> r.logical_date
	      ORDER BY ti.id LIMIT 5) ti
	JOIN ax_migrate_0014.dag_runs r ON r.id = ti.dag_run_id;
	IF bad IS NOT NULL THEN
		RAISE EXCEPTION 'task instances whose logical_time is not their '
		                'run''s logical_date: %', bad
			USING HINT = 'set task_instances.logical_time to the run''s '
			             'logical_date for these rows, then migrate again';
	END IF;
END
$$;

CREATE TABLE dag_runs (
	id             bigint GENERATED ALWAYS AS IDENTITY,
	dag_id         bigint NOT NULL REFERENCES dags (id) ON DELETE CASCADE,
	dag_version_id bigint NOT NULL REFERENCES dag_versions (id),
	run_type       text NOT NULL
	               CHECK (run_type IN ('scheduled', 'manual', 'backfill')),
	logical_date   timestamptz NOT NULL,
	interval_start timestamptz NOT NULL,
	interval_end   timestamptz NOT NULL,
	state          text NOT NULL DEFAULT 'QUEUED'
	               CHECK (state IN ('QUEUED', 'RUNNING', 'SUCCESS',
	                                'FAILED', 'CANCELED')),
	conf           jsonb NOT NULL DEFAULT '{}',
	created_at     timestamptz NOT NULL DEFAULT now(),
	started_at     timestamptz,
	ended_at       timestamptz,
	due_at         timestamptz,
	reason         text,
	CHECK (interval_start <= interval_end),
	PRIMARY KEY (id, logical_date),
	UNIQUE (dag_id, logical_date)
) PARTITION BY RANGE (logical_date);

CREATE INDEX dag_runs_active_idx ON dag_runs (dag_id, logical_date)
	WHERE state IN ('QUEUED', 'RUNNING');

CREATE TABLE task_instances (
	id           bigint GENERATED ALWAYS AS IDENTITY,
	dag_run_id   bigint NOT NULL,
	dag_id       bigint NOT NULL REFERENCES dags (id) ON DELETE CASCADE,
	task         text NOT NULL CHECK (length(task) BETWEEN 1 AND 250),
	logical_time timestamptz NOT NULL,
	shard        integer NOT NULL DEFAULT 0,
	shard_total  integer NOT NULL DEFAULT 1,
	state        text NOT NULL DEFAULT 'PENDING'
	             CHECK (state IN ('PENDING', 'READY', 'RUNNING', 'SUCCESS',
	                              'FAILED', 'TIMEOUT', 'CANCELED',
	                              'SKIPPED', 'UNKNOWN')),
	reason       text,
	priority     integer NOT NULL DEFAULT 0,
	channel      text NOT NULL DEFAULT 'Px'
	             CHECK (channel IN ('P0', 'Px', 'k8s', 'biz')),
	worker_group text NOT NULL DEFAULT 'default',
	pool         text,
	try_number   integer NOT NULL DEFAULT 0 CHECK (try_number >= 0),
	max_tries    integer NOT NULL DEFAULT 1 CHECK (max_tries >= 1),
	created_at   timestamptz NOT NULL DEFAULT now(),
	updated_at   timestamptz NOT NULL DEFAULT now(),
	ready_at     timestamptz,
	started_at   timestamptz,
	ended_at     timestamptz,
	CHECK (shard >= 0 AND shard_total >= 1 AND shard < shard_total),
	PRIMARY KEY (id, logical_time),
	UNIQUE (dag_id, task, logical_time, shard),
	FOREIGN KEY (dag_run_id, logical_time)
		REFERENCES dag_runs (id, logical_date) ON DELETE CASCADE
) PARTITION BY RANGE (logical_time);

-- Row triggers of a partitioned table are cloned to every partition,
-- present and future. The state guard as 0013 left it: the function runs
-- only for a move ax_ti_move_ok refuses. The indexes are those 0013 left
-- (no event_log_run_id_idx, no attempts_started_idx).
CREATE TRIGGER task_instances_state_guard BEFORE UPDATE ON task_instances
	FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state
	                   AND NOT ax_ti_move_ok(OLD.state, NEW.state,
	                                         OLD.started_at,
	                                         NEW.started_at))
	EXECUTE FUNCTION ax_ti_state_guard();

CREATE INDEX task_instances_run_idx ON task_instances (dag_run_id);
CREATE INDEX task_instances_active_idx ON task_instances (dag_id, state)
	WHERE state IN ('PENDING', 'READY', 'RUNNING', 'UNKNOWN');

CREATE TABLE attempts (
	id            bigint GENERATED ALWAYS AS IDENTITY,
	run_id        uuid NOT NULL,
	instance_id   bigint NOT NULL,
	logical_time  timestamptz NOT NULL, -- the instance's logical_time
	number        integer NOT NULL CHECK (number >= 1),
	state         text NOT NULL DEFAULT 'QUEUED'
	              CHECK (state IN ('QUEUED', 'DISPATCHED', 'RUNNING',
	                               'SUCCESS', 'FAILED', 'TIMEOUT',
	                               'CANCELED', 'UNKNOWN')),
	worker_id     text,
	due_at        timestamptz NOT NULL,
	admitted_at   timestamptz,
	dispatched_at timestamptz,
	started_at    timestamptz,
	ended_at      timestamptz,
	exit_status   integer,
	log_path      text,
	reason        text,
	created_at    timestamptz NOT NULL DEFAULT now(),
	command       text,
	PRIMARY KEY (id, logical_time),
	UNIQUE (run_id, logical_time),
	UNIQUE (instance_id, number, logical_time),
	FOREIGN KEY (instance_id, logical_time)
		REFERENCES task_instances (id, logical_time) ON DELETE CASCADE
) PARTITION BY RANGE (logical_time);

CREATE INDEX attempts_worker_open_idx ON attempts (worker_id)
	WHERE state IN ('DISPATCHED', 'RUNNING');

CREATE TABLE event_log (
	id          bigint GENERATED ALWAYS AS IDENTITY,
	event_id    uuid NOT NULL,
	type        text NOT NULL,
	time        timestamptz NOT NULL DEFAULT now(),
	dag_id      bigint,
	dag_run_id  bigint,
	instance_id bigint,
	run_id      uuid,
	attempt     integer,
	trace_id    text,
	reason      text,
	payload     jsonb NOT NULL DEFAULT '{}',
	PRIMARY KEY (id, time),
	UNIQUE (event_id, time)
) PARTITION BY RANGE (time);

CREATE TRIGGER event_log_append_only BEFORE UPDATE OR DELETE ON event_log
	FOR EACH ROW EXECUTE FUNCTION ax_refuse_change('append-only');
CREATE TRIGGER event_log_no_truncate BEFORE TRUNCATE ON event_log
	FOR EACH STATEMENT EXECUTE FUNCTION ax_refuse_change('append-only');

CREATE INDEX event_log_instance_idx ON event_log (instance_id, id)
	WHERE instance_id IS NOT NULL;
CREATE INDEX event_log_run_idx ON event_log (dag_run_id, id)
	WHERE dag_run_id IS NOT NULL;
CREATE INDEX event_log_time_idx ON event_log USING brin (time);

CREATE TABLE dag_runs_default PARTITION OF dag_runs DEFAULT;
CREATE TABLE task_instances_default PARTITION OF task_instances DEFAULT;
CREATE TABLE attempts_default PARTITION OF attempts DEFAULT;
CREATE TABLE event_log_default PARTITION OF event_log DEFAULT;

-- A month partition for every month that has rows (before the rows come,
-- so that none lands in the default partition), then the months ahead.
SELECT count(*) FILTER (WHERE ax_part_create(t, m)) FROM (
	SELECT DISTINCT 'dag_runs' AS t,
	       date_trunc('month', logical_date AT TIME ZONE 'UTC')::date AS m
	FROM ax_migrate_0014.dag_runs WHERE isfinite(logical_date)
	UNION
	SELECT DISTINCT 'task_instances',
	       date_trunc('month', logical_date AT TIME ZONE 'UTC')::date
	FROM ax_migrate_0014.dag_runs WHERE isfinite(logical_date)
	UNION
	SELECT DISTINCT 'attempts',
	       date_trunc('month', logical_date AT TIME ZONE 'UTC')::date
	FROM ax_migrate_0014.dag_runs WHERE isfinite(logical_date)
	UNION
	SELECT DISTINCT 'event_log',
	       date_trunc('month', time AT TIME ZONE 'UTC')::date
	FROM ax_migrate_0014.event_log WHERE isfinite(time)
	ORDER BY 2, 1) months;

SELECT ax_history_ensure(3);

INSERT INTO dag_runs (id, dag_id, dag_version_id, run_type, logical_date,
                      interval_start, interval_end, state, conf,
                      created_at, started_at, ended_at, due_at, reason)
OVERRIDING SYSTEM VALUE
SELECT id, dag_id, dag_version_id, run_type, logical_date, interval_start,
       interval_end, state, conf, created_at, started_at, ended_at, due_at,
       reason
FROM ax_migrate_0014.dag_runs;

INSERT INTO task_instances (id, dag_run_id, dag_id, task, logical_time,
                            shard, shard_total, state, reason, priority,
                            channel, worker_group, pool, try_number,
                            max_tries, created_at, updated_at, ready_at,
                            started_at, ended_at)
OVERRIDING SYSTEM VALUE
SELECT id, dag_run_id, dag_id, task, logical_time, shard, shard_total,
       state, reason, priority, channel, worker_group, pool, try_number,
       max_tries, created_at, updated_at, ready_at, started_at, ended_at
FROM ax_migrate_0014.task_instances;

INSERT INTO attempts (id, run_id, instance_id, logical_time, number,
                      state, worker_id, due_at, admitted_at, dispatched_at,
                      started_at, ended_at, exit_status, log_path, reason,
                      created_at, command)
OVERRIDING SYSTEM VALUE
SELECT a.id, a.run_id, a.instance_id, ti.logical_time, a.number, a.state,
       a.worker_id, a.due_at, a.admitted_at, a.dispatched_at, a.started_at,
       a.ended_at, a.exit_status, a.log_path, a.reason, a.created_at,
       a.command
FROM ax_migrate_0014.attempts a
JOIN ax_migrate_0014.task_instances ti ON ti.id = a.instance_id;

INSERT INTO event_log (id, event_id, type, time, dag_id, dag_run_id,
                       instance_id, run_id, attempt, trace_id, reason,
                       payload)
OVERRIDING SYSTEM VALUE
SELECT id, event_id, type, time, dag_id, dag_run_id, instance_id, run_id,
       attempt, trace_id, reason, payload
FROM ax_migrate_0014.event_log;

-- Each sequence continues after the old one (not merely after the largest
-- id kept), so an id handed out once is never handed out again.
DO $$
DECLARE
	t    text;
	last bigint;
BEGIN
	FOREACH t IN ARRAY ARRAY['dag_runs', 'task_instances', 'attempts',
	                         'event_log'] LOOP
		EXECUTE format('SELECT CASE WHEN is_called THEN last_value ELSE '
		               'last_value - 1 END FROM %s',
		               pg_get_serial_sequence('ax_migrate_0014.' || t, 'id'))
			INTO last;
		EXECUTE format('SELECT greatest(%s, coalesce(max(id), 0)) FROM %I',
		               last, t) INTO last;
		IF last > 0 THEN
			PERFORM setval(pg_get_serial_sequence(t, 'id'), last);
		END IF;
	END LOOP;
END
$$;

DROP SCHEMA ax_migrate_0014 CASCADE;

ANALYZE dag_runs, task_instances, attempts, event_log;
