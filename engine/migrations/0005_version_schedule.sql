-- 0005_version_schedule.sql - the schedule of each DAG version as plain
-- columns, so that axd arms a million schedules at start-up without
-- decoding a million DAG definitions (issue 4: axd under 500 MB with
-- 1,000,000 armed schedules; actors/dag_loader.c reads these columns in
-- slices and never the definition).
--
-- The columns are GENERATED from dag_versions.definition (the JSON of
-- ax_dag_to_json): every writer (ax_dag_store_submit, the API, a bulk
-- INSERT ... SELECT) gets them for free, and adding them rewrites the
-- table once, which fills them for the rows that exist already. A version
-- is immutable, and so are these columns.
--
-- schedule_expr is the text actors/dag_schedule.c ax_dag_schedule_expr()
-- writes into schedules.expression: the cron as written, "@every <dur>"
-- (dur as ax_duration_fmt printed it into the definition) or "@at
-- <instant>"; NULL for a DAG without schedule (API-triggered only).
-- schedule_start / schedule_end are the DAG's start / end as written (wall
-- time in schedule_tz unless they carry an offset): C resolves them with
-- its own time zone reader, the one every fire time is computed with.

ALTER TABLE dag_versions
	ADD COLUMN schedule_expr text GENERATED ALWAYS AS (
		CASE definition #>> '{schedule,kind}'
		WHEN 'cron'  THEN definition #>> '{schedule,cron}'
		WHEN 'every' THEN '@every ' || (definition #>> '{schedule,every}')
		WHEN 'at'    THEN '@at ' || (definition #>> '{schedule,at}')
		END) STORED,
	ADD COLUMN schedule_tz text GENERATED ALWAYS AS (
		coalesce(definition #>> '{schedule,timezone}', 'UTC')) STORED,
	ADD COLUMN schedule_catchup boolean GENERATED ALWAYS AS (
		coalesce((definition ->> 'catchup')::boolean, false)) STORED,
	ADD COLUMN schedule_start text GENERATED ALWAYS AS (
		definition ->> 'start') STORED,
	ADD COLUMN schedule_end text GENERATED ALWAYS AS (
		definition ->> 'end') STORED;
