-- 0003_sched_runs.sql - what the time and dependency detectors record on
-- DAG runs beyond 0001: the theoretical start of a run (the fire instant,
-- the reference for scheduling latency) and the reason code of its state
-- (CONCURRENCY_BLOCKED for a discarded or held run, SUPERSEDED for a
-- replaced one, WAIT_DEPENDENCY for a run waiting on an upstream DAG).

ALTER TABLE dag_runs ADD COLUMN due_at timestamptz;
ALTER TABLE dag_runs ADD COLUMN reason text;
