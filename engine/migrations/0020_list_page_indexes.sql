-- 0020_list_page_indexes.sql - indexes for the filters of the API's list
-- pages, so that a page is one index range in its sort order however
-- large the history (`axctl bench --scenario scale`: 100,000 DAGs, 1M
-- instances, 1M events; target P99 under 50 ms).
--
-- Every list page is keyset-paginated on id (api-server/api_runs.c,
-- api_misc.c) and sorts by id. Without an index that leads with the
-- filtered column and ends with id, PostgreSQL walks the primary key in
-- id order and filters, reading (page size / share of matching rows)
-- rows: a filter that 0.1 % of the rows match reads 100,000 rows for a
-- page of 100, and a filter nothing matches reads the whole table. The
-- scale bench measured instances?state=FAILED at P99 200 ms,
-- events?type=instance.failed at 90 ms and events?dag= (which also
-- joined every event to dags to compare names) at 335 ms.
--
-- Write cost. Every index costs an entry and a WAL record per row
-- version (0013). The task_instances and dag_runs indexes are partial on
-- the outcomes that are rare in a large history: an instance or run that
-- goes the usual way to SUCCESS never enters them, and one that fails
-- enters once. The two event_log indexes hold every event (a filter by
-- DAG or by type can ask for any DAG or type), one entry each per event;
-- nothing updates events. SUCCESS and the unfinished states need no new
-- index: SUCCESS rows are dense in id order (the primary key finds a page
-- at once) and the unfinished ones are few (task_instances_active_idx,
-- dag_runs_active_idx).
--
-- event_log is partitioned (0015): an index created on the parent is
-- created on every partition, present and future, and the pages' ORDER
-- BY id reads the partitions' index ranges merged (Merge Append), each
-- stopping once the page is full. The build takes a SHARE lock on each
-- table (writes wait; reads do not) for about a second per million rows.

-- GET /api/v1/instances?state=FAILED (and the other outcomes), newest
-- first.
CREATE INDEX task_instances_outcome_idx ON task_instances (state, id)
	WHERE state IN ('FAILED', 'TIMEOUT', 'CANCELED', 'SKIPPED', 'UNKNOWN');

-- GET /api/v1/runs?state=FAILED and state=CANCELED, newest first.
CREATE INDEX dag_runs_outcome_idx ON dag_runs (state, id)
	WHERE state IN ('FAILED', 'CANCELED');

-- GET /api/v1/events?dag=NAME: the DAG's events in id order.
CREATE INDEX event_log_dag_idx ON event_log (dag_id, id)
	WHERE dag_id IS NOT NULL;

-- GET /api/v1/events?type=TYPE: the events of one type in id order.
CREATE INDEX event_log_type_idx ON event_log (type, id);
