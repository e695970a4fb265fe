-- worker_usage.sql - the live water level of each worker's host beside
-- the slots it offers (issue 13: workers report capacity and live usage
-- in heartbeats). The queue writes these with the rest of the row, at
-- most once per heartbeat interval (actors/queue/queue_workers.c):
-- the machine's CPUs, memory and load, and what the worker's running
-- attempts use now (their cgroups, else their process groups), summed.
-- NULL until the worker's first heartbeat with them (older workers).
ALTER TABLE workers
	ADD COLUMN load_x100        integer CHECK (load_x100 >= 0),
	ADD COLUMN cpus             integer CHECK (cpus >= 0),
	ADD COLUMN mem_total_kb     bigint  CHECK (mem_total_kb >= 0),
	ADD COLUMN mem_available_kb bigint  CHECK (mem_available_kb >= 0),
	ADD COLUMN tasks_cpu_milli  integer CHECK (tasks_cpu_milli >= 0),
	ADD COLUMN tasks_rss_kb     bigint  CHECK (tasks_rss_kb >= 0);
