/*
 * api_explain.c - the explain routes of ax-api (see api_explain.h).
 *
 * One statement per request reads every row the explanation needs as one
 * jsonb object, the facts of engine/explain.h: the instance or run, its
 * DAG version's upstreams and concurrency, the upstream instances or
 * runs, the instances holding its pool or group, the live workers of its
 * group, the rules its events name, its attempts and its newest events.
 * The instance, its run's upstream instances and its attempts are read
 * from task_instances_all / attempts_all (hot rows and history: the run
 * may have ended long ago); the holders and a run's unfinished instances
 * are unfinished, so always in the hot table. Each part is an index
 * lookup (instance id, run id, the unfinished instances' partial index,
 * the event log's instance and run indexes; in the history one probe per
 * month), so an explanation costs the same on a table of 10 rows or 10
 * million; the timeline keeps the newest EVENTS_MAX events (older ones are
 * counted as left out). ax_explain_build then assembles the answer without
 * I/O.
 */
#include "api_explain.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "api_runs.h"
#include "deadline.h"
#include "explain.h"

#define EVENTS_MAX  1000 /* events of one timeline, newest kept */
#define HOLDERS_MAX 50   /* instances listed as holding a pool or group */

#define STR_(x) #x
#define STR(x)  STR_(x)

/* The events of a timeline: the newest EVENTS_MAX + 1 matching cond (the
 * one more tells that older ones were left out), oldest first. */
#define EVENTS_JSON(cond)                                                     \
	"(SELECT coalesce(jsonb_agg(x.o ORDER BY x.id), '[]') FROM (SELECT "  \
	"e.id, jsonb_build_object('id', e.id, 'type', e.type, 'time_us', "    \
	"ax_us(e.time), 'reason', e.reason, 'attempt', e.attempt, "           \
	"'instance_id', e.instance_id, 'payload', e.payload) AS o FROM "      \
	"event_log e WHERE " cond                                             \
	" ORDER BY e.id DESC LIMIT " STR(EVENTS_MAX) " + 1) x)"

#define RUN_JSON(r, dag)                                                      \
	"jsonb_build_object('id', " r ".id, 'dag', " dag ", 'state', " r      \
	".state, 'reason', " r ".reason, 'run_type', " r ".run_type, "        \
	"'logical_us', ax_us(" r ".logical_date), 'interval_start_us', "      \
	"ax_us(" r ".interval_start), 'interval_end_us', ax_us(" r            \
	".interval_end), 'ended_us', ax_us(" r ".ended_at))"

/* The events of instance i: its own, and those of its run written before
 * its row had an id (the admission of a root instance may decide before
 * the plan's row exists: such events name the task in their payload),
 * and the run's own (no task). */
#define INSTANCE_EVENTS                                                       \
	"(e.instance_id = i.id OR (e.dag_run_id = i.dag_run_id AND "          \
	"e.instance_id IS NULL AND (e.payload->>'task' IS NULL OR "           \
	"(e.payload->>'task' = i.task AND coalesce((e.payload->>"             \
	"'shard_index')::int, 0) = i.shard))))"

static const char instance_sql[] =
    "WITH i AS (SELECT i.*, d.name AS dag, d.paused "
    "FROM task_instances_all i "
    "JOIN dags d ON d.id = i.dag_id WHERE i.id = $1::bigint), "
    "r AS (SELECT r.* FROM dag_runs r, i WHERE r.id = i.dag_run_id), "
    "v AS (SELECT v.definition FROM dag_versions v, r "
    "WHERE v.id = r.dag_version_id) "
    "SELECT jsonb_build_object('subject', 'instance', 'now_us', "
    "ax_us(now()), 'dag_paused', i.paused, "
    "'instance', jsonb_build_object('id', i.id, 'dag', i.dag, 'task', "
    "i.task, 'run_id', i.dag_run_id, 'shard', i.shard, 'shard_total', "
    "i.shard_total, 'state', i.state, 'reason', i.reason, 'worker_group', "
    "i.worker_group, 'pool', i.pool, 'try_number', i.try_number, "
    "'max_tries', i.max_tries, 'logical_us', ax_us(i.logical_time)), "
    "'run', (SELECT " RUN_JSON(
        "r",
        "i.dag") " FROM r), "
                 "'upstream_tasks', (SELECT "
                 "coalesce(jsonb_agg(jsonb_build_object("
                 "'task', u.name, 'instance_id', ui.id, 'state', ui.state, "
                 "'reason', "
                 "ui.reason) ORDER BY u.ord, ui.shard), '[]') FROM v, "
                 "jsonb_array_elements(v.definition->'tasks') t, "
                 "jsonb_array_elements_text(t->'depends_on') WITH ORDINALITY "
                 "u(name, ord) "
                 "LEFT JOIN task_instances_all ui ON ui.dag_run_id = "
                 "i.dag_run_id "
                 "AND ui.task = u.name WHERE t->>'name' = i.task), "
                 "'holders', (SELECT coalesce(jsonb_agg(x.o ORDER BY x.id), "
                 "'[]') FROM "
                 "(SELECT h.id, jsonb_build_object('instance_id', h.id, "
                 "'dag', hd.name, "
                 "'task', h.task, 'state', h.state) AS o FROM task_instances "
                 "h "
                 "JOIN dags hd ON hd.id = h.dag_id WHERE i.state IN "
                 "('PENDING', 'READY') "
                 "AND h.state IN ('READY', 'RUNNING') AND h.id <> i.id AND "
                 "CASE WHEN "
                 "i.pool IS NOT NULL THEN h.pool = i.pool ELSE h.worker_group "
                 "= "
                 "i.worker_group END ORDER BY h.id LIMIT " STR(
                     HOLDERS_MAX) ") x), "
                                  "'workers', (SELECT "
                                  "jsonb_build_object('group', "
                                  "i.worker_group, "
                                  "'live', count(*) FILTER (WHERE w.state = "
                                  "'ACTIVE' AND "
                                  "w.lease_expires_at > now()), 'total', "
                                  "count(*)) FROM workers w "
                                  "WHERE w.worker_group = i.worker_group), "
                                  "'rules', (SELECT "
                                  "coalesce(jsonb_agg(jsonb_build_object('id',"
                                  " ru.id, "
                                  "'action', ru.action, 'note', "
                                  "ru.spec->>'note')), '[]') FROM rules ru "
                                  "WHERE ru.id IN (SELECT "
                                  "(e.payload->>'rule_id')::bigint FROM "
                                  "event_log "
                                  "e WHERE " INSTANCE_EVENTS
                                  " AND e.type = 'instance.blocked' AND "
                                  "jsonb_typeof(e.payload->'rule_id') = "
                                  "'number')), "
                                  "'attempts', (SELECT "
                                  "coalesce(jsonb_agg(jsonb_build_object('"
                                  "number', "
                                  "a.number, 'state', a.state, 'worker_id', "
                                  "a.worker_id, 'exit_status', "
                                  "a.exit_status, 'reason', a.reason, "
                                  "'due_us', ax_us(a.due_at), "
                                  "'admitted_us', ax_us(a.admitted_at), "
                                  "'started_us', "
                                  "ax_us(a.started_at), 'ended_us', "
                                  "ax_us(a.ended_at)) ORDER BY "
                                  "a.number), '[]') FROM attempts_all a WHERE "
                                  "a.instance_id = i.id), "
                                  "'events', " EVENTS_JSON(
                                      INSTANCE_EVENTS) ") FROM i";

static const char run_sql[] =
    "WITH r AS (SELECT r.*, d.name AS dag, d.paused FROM dag_runs r "
    "JOIN dags d ON d.id = r.dag_id WHERE r.id = $1::bigint), "
    "v AS (SELECT v.definition FROM dag_versions v, r "
    "WHERE v.id = r.dag_version_id) "
    "SELECT jsonb_build_object('subject', 'run', 'now_us', ax_us(now()), "
    "'dag_paused', r.paused, 'run', " RUN_JSON(
        "r",
        "r.dag") ", "
                 "'concurrency', (SELECT v.definition->'concurrency' FROM v), "
                 "'deadline_def', (SELECT v.definition->'deadline' FROM v), "
                 "'deadline_tz', (SELECT v.definition->'schedule'->>"
                 "'timezone' FROM v), "
                 "'deadline_missed', EXISTS (SELECT 1 FROM event_log e "
                 "WHERE e.dag_run_id = r.id AND e.type = "
                 "'run.deadline_missed'), "
                 "'upstream_dags', (SELECT "
                 "coalesce(jsonb_agg(jsonb_build_object('dag', "
                 "x.dd->>'dag', 'mode', x.dd->>'mode', 'logical_us', "
                 "ax_us(r.logical_date), 'run_id', ur.id, 'state', ur.state) "
                 "ORDER BY "
                 "x.o), '[]') FROM v, jsonb_array_elements(v.definition->"
                 "'depends_on_dags') WITH ORDINALITY x(dd, o) LEFT JOIN "
                 "LATERAL (SELECT "
                 "u.id, u.state FROM dag_runs u JOIN dags ud ON ud.id = "
                 "u.dag_id WHERE "
                 "ud.name = x.dd->>'dag' AND (x.dd->>'mode' <> 'same_period' "
                 "OR "
                 "u.logical_date = r.logical_date) ORDER BY u.state IN "
                 "('SUCCESS', "
                 "'FAILED') DESC, u.logical_date DESC LIMIT 1) ur ON true), "
                 "'active_runs', (SELECT "
                 "coalesce(jsonb_agg(jsonb_build_object('id', "
                 "a.id, 'state', a.state, 'logical_us', "
                 "ax_us(a.logical_date)) ORDER BY "
                 "a.logical_date, a.id), '[]') FROM dag_runs a WHERE a.dag_id "
                 "= r.dag_id "
                 "AND a.state = 'RUNNING' AND a.id <> r.id), "
                 "'unfinished', (SELECT coalesce(jsonb_agg(x.o ORDER BY "
                 "x.id), '[]') "
                 "FROM (SELECT t.id, jsonb_build_object('instance_id', t.id, "
                 "'task', "
                 "t.task, 'state', t.state, 'reason', t.reason) AS o FROM "
                 "task_instances t WHERE t.dag_run_id = r.id AND t.state IN "
                 "('PENDING', "
                 "'READY', 'RUNNING', 'UNKNOWN') ORDER BY t.id LIMIT " STR(
                     HOLDERS_MAX) ") x), "
                                  "'events', " EVENTS_JSON(
                                      "e.dag_run_id = r.id") ") FROM r";

/*
 * Turns the deadline members run_sql reads (the definition's deadline,
 * its zone, whether the miss was recorded) into the deadline fact
 * {at_us, rule, missed, met_us} explain.h describes; nothing when the
 * DAG declares no deadline.
 */
static void
run_deadline_facts(json_t *facts)
{
	const json_t *run = json_object_get(facts, "run");
	const json_t *tz  = json_object_get(facts, "deadline_tz");
	char          rule[AX_DEADLINE_TEXT_LEN];
	int64_t       at, ended;
	json_t       *dl;
	ax_tz_cache  *tzc = NULL;
	int           has;

	(void) ax_tz_cache_new(&tzc);
	has =
	    run != NULL &&
	    ax_api_deadline_of(
	        json_object_get(facts, "deadline_def"),
	        json_is_string(tz) ? json_string_value(tz) : NULL,
	        json_integer_value(json_object_get(run, "interval_start_us")),
	        json_integer_value(json_object_get(run, "interval_end_us")),
	        tzc, &at, rule, sizeof(rule));
	ax_tz_cache_free(tzc);
	if (has) {
		ended = json_integer_value(json_object_get(run, "ended_us"));
		dl    = json_pack("{s:I, s:s, s:O}", "at_us", (json_int_t) at,
		                  "rule", rule, "missed",
                               json_object_get(facts, "deadline_missed")
		                      ? json_object_get(facts, "deadline_missed")
		                      : json_false());
		const json_t *st = json_object_get(run, "state");
		if (dl != NULL && json_is_string(st) &&
		    strcmp(json_string_value(st), "SUCCESS") == 0 &&
		    ended > 0 && ended <= at)
			json_object_set_new(dl, "met_us", json_integer(ended));
		json_object_set_new(facts, "deadline", dl);
	}
	json_object_del(facts, "deadline_def");
	json_object_del(facts, "deadline_tz");
	json_object_del(facts, "deadline_missed");
}

/*
 * Answers the explanation of the row sql finds for the path id; what
 * names the subject in a 404 ("task instance", "run").
 */
static void
explain(ax_api_req *q, ax_api_resp *r, const char *sql, const char *what)
{
	int64_t   id;
	PGresult *res;
	json_t   *facts, *doc = NULL, *evs;
	ax_err    rv;

	if (!ax_api_parse_id(q->params[0], &id)) {
		ax_api_reply_error(
		    r, 400, "invalid",
		    "%s id must be a positive integer, got '%s'", what,
		    q->params[0]);
		return;
	}
	const char *p[] = { q->params[0] };
	res = ax_api_query_row(q, r, sql, 1, p, "no %s %" PRId64, what, id);
	if (res == NULL)
		return;
	facts = json_loads(PQgetvalue(res, 0, 0), 0, NULL);
	PQclear(res);
	if (facts == NULL) {
		ax_api_reply_err(r,
		                 ax_err_set(AX_EINTERNAL,
		                            "explain: the facts of %s %" PRId64
		                            " are not JSON",
		                            what, id));
		return;
	}
	run_deadline_facts(facts);
	evs = json_object_get(facts, "events");
	if (json_array_size(evs) > EVENTS_MAX) {
		json_array_remove(evs, 0);
		json_object_set_new(facts, "events_truncated", json_true());
	}
	rv = ax_explain_build(facts, &doc);
	json_decref(facts);
	if (rv != AX_OK) {
		ax_api_reply_err(r, rv);
		return;
	}
	ax_api_reply_json(r, 200, doc);
}

void
ax_api_instance_explain(ax_api_req *q, ax_api_resp *r)
{
	explain(q, r, instance_sql, "task instance");
}

void
ax_api_run_explain(ax_api_req *q, ax_api_resp *r)
{
	explain(q, r, run_sql, "run");
}
