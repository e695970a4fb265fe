-- 0001_init.sql - the AX schema: DAGs and their immutable versions, task
-- templates, schedules, DAG runs, task instances, attempts, the append-only
-- event log, workers and the scheduler lease.
--
-- Conventions: every instant is timestamptz (UTC on the wire; the
-- database's clock is the reference across machines). C code passes
-- instants as microseconds since the epoch and converts with ax_ts() /
-- ax_us(), which are exact (no floating point). States and kinds are text
-- with CHECK constraints rather than enum types, so a later migration can
-- add a value inside a transaction.
--
-- Applied by engine/migrate.c inside one transaction; never edit this file
-- once released (its checksum is recorded): add 0002_... instead.

CREATE FUNCTION ax_ts(us bigint) RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT timestamptz 'epoch' + us * interval '1 microsecond' $$;

CREATE FUNCTION ax_us(ts timestamptz) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT (extract(epoch FROM ts) * 1000000)::bigint $$;

-- Refuses UPDATE / DELETE / TRUNCATE on tables that are append-only or
-- immutable. SQLSTATE 42501 (insufficient_privilege) -> AX_EPERM in C.
CREATE FUNCTION ax_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION '% on % is not allowed: the table is %',
		TG_OP, TG_TABLE_NAME, TG_ARGV[0]
		USING ERRCODE = 'insufficient_privilege',
		HINT = 'write a new row instead';
END
$$;

-- DAGs ------------------------------------------------------------------

CREATE TABLE dags (
	id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	name              text NOT NULL UNIQUE
	                  CHECK (length(name) BETWEEN 1 AND 250),
	paused            boolean NOT NULL DEFAULT false,
	active_version_id bigint, -- FK added below (cycle with dag_versions)
	created_at        timestamptz NOT NULL DEFAULT now(),
	updated_at        timestamptz NOT NULL DEFAULT now()
);

-- Immutable: a change of YAML is a new row; resubmitting the same content
-- hits UNIQUE (dag_id, content_hash) and is a no-op.
CREATE TABLE dag_versions (
	id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	dag_id       bigint NOT NULL REFERENCES dags (id) ON DELETE CASCADE,
	version      integer NOT NULL CHECK (version >= 1), -- 1, 2, ... per DAG
	content_hash text NOT NULL CHECK (content_hash ~ '^[0-9a-f]{64}$'),
	yaml         text NOT NULL,
	definition   jsonb NOT NULL, -- the parsed, validated DAG
	source       text,           -- file path or "api"
	created_at   timestamptz NOT NULL DEFAULT now(),
	UNIQUE (dag_id, content_hash),
	UNIQUE (dag_id, version)
);

ALTER TABLE dags ADD CONSTRAINT dags_active_version_fk
	FOREIGN KEY (active_version_id) REFERENCES dag_versions (id)
	DEFERRABLE INITIALLY DEFERRED;

CREATE TRIGGER dag_versions_immutable BEFORE UPDATE ON dag_versions
	FOR EACH ROW EXECUTE FUNCTION ax_refuse_change('immutable');

-- Task templates: the reusable "what and how", versioned like DAGs.
CREATE TABLE task_templates (
	id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	name              text NOT NULL UNIQUE
	                  CHECK (length(name) BETWEEN 1 AND 250),
	active_version_id bigint,
	created_at        timestamptz NOT NULL DEFAULT now(),
	updated_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE task_template_versions (
	id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	template_id  bigint NOT NULL REFERENCES task_templates (id)
	             ON DELETE CASCADE,
	version      integer NOT NULL CHECK (version >= 1),
	content_hash text NOT NULL CHECK (content_hash ~ '^[0-9a-f]{64}$'),
	yaml         text NOT NULL,
	definition   jsonb NOT NULL,
	source       text,
	created_at   timestamptz NOT NULL DEFAULT now(),
	UNIQUE (template_id, content_hash),
	UNIQUE (template_id, version)
);

ALTER TABLE task_templates ADD CONSTRAINT task_templates_active_version_fk
	FOREIGN KEY (active_version_id) REFERENCES task_template_versions (id)
	DEFERRABLE INITIALLY DEFERRED;

CREATE TRIGGER task_template_versions_immutable
	BEFORE UPDATE ON task_template_versions
	FOR EACH ROW EXECUTE FUNCTION ax_refuse_change('immutable');

-- Schedules: one per DAG. next_fire_at is persisted before the time
-- detector fires, so a restart neither skips nor repeats a period.
CREATE TABLE schedules (
	id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	dag_id       bigint NOT NULL UNIQUE REFERENCES dags (id)
	             ON DELETE CASCADE,
	expression   text NOT NULL,            -- cron with seconds
	tz           text NOT NULL DEFAULT 'UTC',
	catchup      boolean NOT NULL DEFAULT false,
	start_at     timestamptz,
	end_at       timestamptz,
	next_fire_at timestamptz,              -- NULL: nothing left to fire
	last_fire_at timestamptz,
	updated_at   timestamptz NOT NULL DEFAULT now()
);

-- Recovery reads every armed schedule once at start-up.
CREATE INDEX schedules_next_fire_idx ON schedules (next_fire_at)
	WHERE next_fire_at IS NOT NULL;

-- Named resource pools (slots shared across DAGs).
CREATE TABLE pools (
	name        text PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 250),
	slots       integer NOT NULL CHECK (slots >= 0),
	description text,
	updated_at  timestamptz NOT NULL DEFAULT now()
);

-- DAG runs ---------------------------------------------------------------

-- One logical period of a DAG, or one manual/backfill run. Unique on
-- (dag, logical_date) regardless of run_type: the task instance key
-- (dag, task, logical_time, shard) does not carry the run type, so a
-- manual or backfill run of a period that already has a run would collide
-- on its instances anyway; the caller clears the existing run instead.
CREATE TABLE dag_runs (
	id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
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
	conf           jsonb NOT NULL DEFAULT '{}', -- params of a manual run
	created_at     timestamptz NOT NULL DEFAULT now(),
	started_at     timestamptz,
	ended_at       timestamptz,
	CHECK (interval_start <= interval_end),
	UNIQUE (dag_id, logical_date)
);

-- Active runs per DAG: max_active_runs and the overlap policy.
CREATE INDEX dag_runs_active_idx ON dag_runs (dag_id, logical_date)
	WHERE state IN ('QUEUED', 'RUNNING');

-- Task instances ---------------------------------------------------------

-- The state machine of DESIGN.md 3; engine/state.c holds the same table.
CREATE FUNCTION ax_ti_move_legal(f text, t text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT CASE f
	WHEN 'PENDING'  THEN t IN ('READY', 'CANCELED', 'SKIPPED')
	WHEN 'READY'    THEN t IN ('RUNNING', 'CANCELED')
	WHEN 'RUNNING'  THEN t IN ('SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELED',
	                           'UNKNOWN')
	WHEN 'SUCCESS'  THEN t = 'PENDING'
	WHEN 'FAILED'   THEN t = 'PENDING'
	WHEN 'TIMEOUT'  THEN t = 'PENDING'
	WHEN 'CANCELED' THEN t = 'PENDING'
	WHEN 'SKIPPED'  THEN t = 'PENDING'
	WHEN 'UNKNOWN'  THEN t IN ('READY', 'SUCCESS', 'FAILED')
	ELSE false
END
$$;

-- Raises P0001 (-> AX_ESTATE in C) with the same wording as
-- ax_state_check, so no writer can bypass the state machine.
CREATE FUNCTION ax_ti_state_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF NOT coalesce(ax_ti_move_legal(OLD.state, NEW.state), false) THEN
		RAISE EXCEPTION '% -> % is not a legal move', OLD.state, NEW.state
			USING ERRCODE = 'P0001',
			DETAIL = format('task instance %s', OLD.id),
			HINT = 'see the state machine in DESIGN.md section 3';
	END IF;
	RETURN NEW;
END
$$;

CREATE TABLE task_instances (
	id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	dag_run_id   bigint NOT NULL REFERENCES dag_runs (id) ON DELETE CASCADE,
	dag_id       bigint NOT NULL REFERENCES dags (id) ON DELETE CASCADE,
	task         text NOT NULL CHECK (length(task) BETWEEN 1 AND 250),
	logical_time timestamptz NOT NULL, -- the run's logical_date
	shard        integer NOT NULL DEFAULT 0,
	shard_total  integer NOT NULL DEFAULT 1,
	state        text NOT NULL DEFAULT 'PENDING'
	             CHECK (state IN ('PENDING', 'READY', 'RUNNING', 'SUCCESS',
	                              'FAILED', 'TIMEOUT', 'CANCELED',
	                              'SKIPPED', 'UNKNOWN')),
	reason       text,                 -- stable reason code (WAIT_...)
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
	UNIQUE (dag_id, task, logical_time, shard)
);

CREATE TRIGGER task_instances_state_guard BEFORE UPDATE ON task_instances
	FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
	EXECUTE FUNCTION ax_ti_state_guard();

-- Run completion and release of downstreams look instances up per run.
CREATE INDEX task_instances_run_idx ON task_instances (dag_run_id);
-- Recovery after a restart reads the unfinished instances once; small
-- because finished ones drop out of the partial index.
CREATE INDEX task_instances_active_idx ON task_instances (dag_id, state)
	WHERE state IN ('PENDING', 'READY', 'RUNNING', 'UNKNOWN');

-- Attempts: one try of an instance. run_id is handed to user code as
-- AX_RUN_ID and makes every duplicate message harmless.
CREATE TABLE attempts (
	id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	run_id        uuid NOT NULL UNIQUE,
	instance_id   bigint NOT NULL REFERENCES task_instances (id)
	              ON DELETE CASCADE,
	number        integer NOT NULL CHECK (number >= 1),
	state         text NOT NULL DEFAULT 'QUEUED'
	              CHECK (state IN ('QUEUED', 'DISPATCHED', 'RUNNING',
	                               'SUCCESS', 'FAILED', 'TIMEOUT',
	                               'CANCELED', 'UNKNOWN')),
	worker_id     text,
	due_at        timestamptz NOT NULL, -- theoretical start
	admitted_at   timestamptz,
	dispatched_at timestamptz,
	started_at    timestamptz,          -- user code exec'd
	ended_at      timestamptz,
	exit_status   integer,
	log_path      text,
	reason        text,
	created_at    timestamptz NOT NULL DEFAULT now(),
	UNIQUE (instance_id, number)
);

-- A lapsed worker lease moves that worker's open attempts to UNKNOWN.
CREATE INDEX attempts_worker_open_idx ON attempts (worker_id)
	WHERE state IN ('DISPATCHED', 'RUNNING');
-- Latency reports (axctl bench) read attempts by start time.
CREATE INDEX attempts_started_idx ON attempts USING brin (started_at);

-- Event log (append-only audit) ------------------------------------------

CREATE TABLE event_log (
	id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	event_id    uuid NOT NULL UNIQUE, -- envelope id: re-sends are no-ops
	type        text NOT NULL,
	time        timestamptz NOT NULL DEFAULT now(),
	dag_id      bigint,   -- ids without foreign keys: the audit trail
	dag_run_id  bigint,   -- outlives the rows it talks about
	instance_id bigint,
	run_id      uuid,
	attempt     integer,
	trace_id    text,
	reason      text,
	payload     jsonb NOT NULL DEFAULT '{}'
);

CREATE TRIGGER event_log_append_only BEFORE UPDATE OR DELETE ON event_log
	FOR EACH ROW EXECUTE FUNCTION ax_refuse_change('append-only');
CREATE TRIGGER event_log_no_truncate BEFORE TRUNCATE ON event_log
	FOR EACH STATEMENT EXECUTE FUNCTION ax_refuse_change('append-only');

-- `axctl explain <instance>`: the decision timeline of one instance.
CREATE INDEX event_log_instance_idx ON event_log (instance_id, id)
	WHERE instance_id IS NOT NULL;
CREATE INDEX event_log_run_idx ON event_log (dag_run_id, id)
	WHERE dag_run_id IS NOT NULL;
CREATE INDEX event_log_run_id_idx ON event_log (run_id)
	WHERE run_id IS NOT NULL;
CREATE INDEX event_log_time_idx ON event_log USING brin (time);

-- Workers and leases -----------------------------------------------------

CREATE TABLE workers (
	id                text PRIMARY KEY, -- chosen by the worker, stable
	worker_group      text NOT NULL,
	slots             integer NOT NULL CHECK (slots >= 0),
	used_slots        integer NOT NULL DEFAULT 0 CHECK (used_slots >= 0),
	address           text,
	hostname          text,
	pid               integer,
	state             text NOT NULL DEFAULT 'ACTIVE'
	                  CHECK (state IN ('ACTIVE', 'DRAINING', 'LOST',
	                                   'GONE')),
	registered_at     timestamptz NOT NULL DEFAULT now(),
	last_heartbeat_at timestamptz NOT NULL DEFAULT now(),
	lease_expires_at  timestamptz NOT NULL
);

-- The liveness check finds the workers whose lease lapsed.
CREATE INDEX workers_lease_idx ON workers (lease_expires_at)
	WHERE state IN ('ACTIVE', 'DRAINING');

-- Active/standby axd: one row. The holder renews expires_at; a takeover
-- increments epoch, and scheduler writes are fenced by it.
CREATE TABLE scheduler_lease (
	id          boolean PRIMARY KEY DEFAULT true CHECK (id),
	holder      text,
	epoch       bigint NOT NULL DEFAULT 0 CHECK (epoch >= 0),
	acquired_at timestamptz,
	expires_at  timestamptz
);

INSERT INTO scheduler_lease (id, epoch) VALUES (true, 0);
