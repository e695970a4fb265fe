-- api_pages_gen.sql - a large history for tests/bench/api_pages.sh, made in
-- SQL with generate_series on a migrated, empty AX database:
-- 100,000 DAGs, 1,000,000 runs (10 per DAG, 18 days apart from
-- 2026-06-03), 10,000,000 task instances (10 per run, 1 % of runs FAILED
-- at their last task, the newest runs of every 50th DAG RUNNING),
-- 10,000,000 attempts and 10,000,000 events. Ids grow with logical time,
-- as they do in production. About 15 minutes and 12 GB on a small
-- machine.
--
--   psql -v ON_ERROR_STOP=1 -d ax -f tests/bench/api_pages_gen.sql
INSERT INTO dags (name) SELECT format('dag_%s', lpad(g::text, 6, '0')) FROM generate_series(1, 100000) g;
INSERT INTO dag_versions (dag_id, version, content_hash, yaml, definition) SELECT id, 1, repeat('a', 64), 'x', '{}' FROM dags;
UPDATE dags SET active_version_id = v.id FROM dag_versions v WHERE v.dag_id = dags.id;
INSERT INTO dag_runs (dag_id, dag_version_id, run_type, logical_date, interval_start, interval_end, state, started_at, ended_at, due_at)
SELECT d, d, 'scheduled', ts, ts, ts, CASE WHEN k = 9 AND d % 50 = 0 THEN 'RUNNING' WHEN d % 97 = k THEN 'FAILED' ELSE 'SUCCESS' END, ts, ts + interval '1 minute', ts
FROM generate_series(0, 9) k, generate_series(1, 100000) d,
LATERAL (SELECT timestamptz '2026-06-03 00:00+00' + k * interval '18 days' + (d % 86400) * interval '1 second' AS ts) t
ORDER BY ts;
INSERT INTO task_instances (dag_run_id, dag_id, task, logical_time, state, try_number, started_at, ended_at, ready_at)
SELECT r.id, r.dag_id, 't' || t, r.logical_date,
 CASE WHEN r.state = 'RUNNING' THEN (CASE WHEN t < 5 THEN 'SUCCESS' WHEN t = 5 THEN 'RUNNING' ELSE 'PENDING' END)
      WHEN r.state = 'FAILED' AND t = 9 THEN 'FAILED' ELSE 'SUCCESS' END,
 1, r.logical_date, r.logical_date + interval '10 seconds', r.logical_date
FROM dag_runs r, generate_series(0, 9) t ORDER BY r.id, t;
INSERT INTO attempts (run_id, instance_id, logical_time, number, state, worker_id, due_at, dispatched_at, started_at, ended_at, exit_status, log_path)
SELECT gen_random_uuid(), id, logical_time, 1, CASE state WHEN 'PENDING' THEN 'QUEUED' ELSE state END, 'w' || (id % 50), logical_time, logical_time, started_at, ended_at, 0, '/logs/' || id
FROM task_instances ORDER BY id;
INSERT INTO event_log (event_id, type, time, dag_id, dag_run_id, instance_id, run_id, attempt, reason, payload)
SELECT gen_random_uuid(), 'instance.' || lower(ti.state), ti.ended_at, ti.dag_id, ti.dag_run_id, ti.id, NULL, 1, NULL, '{}'
FROM task_instances ti ORDER BY ti.id;
VACUUM ANALYZE;
