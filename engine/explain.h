/*
 * explain.h - "why is this not running": the explanation of one task
 * instance or one DAG run, assembled from the rows that describe it.
 *
 * Role: ax-api (api-server/api_explain.c) reads the rows of an instance
 * or run with a few indexed queries and hands them here as one JSON
 * object (the facts, below); ax_explain_build turns them into the
 * explanation document of GET /api/v1/{instances,runs}/{id}/explain
 * (api-server/openapi.yaml, docs/explain.md), and ax_explain_text renders
 * that document for people (`axctl explain`). Both are pure: no I/O, no
 * clock (the facts carry "now"), no global state; table-driven tests in
 * tests/unit/test_explain.c.
 *
 * Facts (every instant in UTC microseconds; absent members count as
 * null or empty):
 *   now_us                 the database's clock when the rows were read
 *   subject                "instance" or "run"
 *   instance               {id, dag, task, run_id, shard, shard_total,
 *                           state, reason, worker_group, pool,
 *                           try_number, max_tries, logical_us}
 *   run                    {id, dag, state, reason, run_type, logical_us,
 *                           interval_start_us, interval_end_us}
 *   dag_paused             true when the DAG is paused
 *   concurrency            {max_active_runs, policy} of the run's version
 *   upstream_tasks         [{task, instance_id, state, reason}] the
 *                           instance's upstreams in its run (instance_id
 *                           null: not planned yet)
 *   upstream_dags          [{dag, mode, logical_us, run_id, state}] the
 *                           run's depends_on_dags and the upstream run
 *                           that answers each (run_id null: no run yet)
 *   active_runs            [{id, state, logical_us}] the other active
 *                           runs of the DAG, oldest first
 *   holders                [{instance_id, dag, task, state}] instances
 *                           holding slots of the instance's pool (or its
 *                           worker group when it has no pool)
 *   workers                {group, live, total} of the instance's group
 *   rules                  [{id, action, note}] rules events name
 *   attempts               [{number, state, worker_id, exit_status,
 *                           reason, due_us, admitted_us, started_us,
 *                           ended_us}] in number order
 *   events                 [{id, type, time_us, reason, attempt,
 *                           instance_id, payload}] in id order
 *   events_truncated       true when older events were left out
 *   unfinished             [{instance_id, task, state, reason}] (runs)
 *   deadline               {at_us, rule, missed, met_us} of a run whose
 *                           DAG declares a deadline (docs/dag-format.md):
 *                           the instant, the rule as written, whether the
 *                           miss was recorded, when it was met (absent:
 *                           not met)
 *
 * Threads: any; the functions share nothing.
 */
#ifndef AX_EXPLAIN_H
#define AX_EXPLAIN_H

#include <jansson.h>

#include "ax_err.h"
#include "buf.h"

/*
 * Builds the explanation of facts into *out (a new reference). Returns
 * AX_EINVAL with a detail when facts is not an object with a subject
 * and its row, AX_ENOMEM when out of memory. Never keeps a reference to
 * facts.
 */
ax_err ax_explain_build(const json_t *facts, json_t **out);

/*
 * Appends the human form of an explanation (as ax_explain_build makes
 * it, or as the API answered it) to b: a header, what it waits for, the
 * attempts and the timeline, one line each. Members it does not know are
 * ignored, so an older axctl reads a newer server's answer.
 */
void ax_explain_text(const json_t *expl, ax_buf *b);

#endif /* AX_EXPLAIN_H */
