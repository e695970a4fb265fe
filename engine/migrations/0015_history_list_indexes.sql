-- 0015_history_list_indexes.sql - indexes that keep ax-api's list pages
-- fast on a large history (tests/bench/api_pages.sh on 10 million
-- instances).
--
-- The list pages are keyset pages: newest (runs, instances) or oldest
-- (events) first by id, `id < cursor` / `id > cursor`, LIMIT. A filter
-- that many rows match is served by walking the primary key; a filter
-- that few rows match needs an index that leads with the filter and ends
-- with id, or the walk reads most of the table before it has a page
-- (measured: instances?state=FAILED read 98,000 rows for 100, 3 s).
--
-- Partial where the happy path should pay nothing: a run or instance
-- enters these indexes only when it fails, times out, is canceled or
-- skipped (the unfinished states have their partial indexes since 0001),
-- so the writes of a successful instance do not grow. The event log gets
-- (dag_id, id) and (type, id): every event pays two index entries, the
-- price of `events?dag=` and `events?type=` answering from an index
-- rather than a walk of the whole log.
--
-- On partitioned tables (0014) an index of the parent is built on every
-- partition, present and future.

CREATE INDEX dag_runs_finished_bad_idx ON dag_runs (state, id)
	WHERE state IN ('FAILED', 'CANCELED');

CREATE INDEX task_instances_finished_bad_idx ON task_instances (state, id)
	WHERE state IN ('FAILED', 'TIMEOUT', 'CANCELED', 'SKIPPED');

CREATE INDEX event_log_dag_idx ON event_log (dag_id, id)
	WHERE dag_id IS NOT NULL;

CREATE INDEX event_log_type_idx ON event_log (type, id);
