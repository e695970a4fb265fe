/*
 * api_rules.c - Allow/Block rule routes of ax-api (see api_rules.h).
 *
 * Validation is engine/rule.c's ax_rule_parse, the parser axd uses when
 * it loads the table: a rule ax-api accepts is a rule axd applies. The
 * test routes evaluate the whole rule set with ax_rules_decide, so an
 * Allow that outranks the rule shows as not held.
 */
#include "api_rules.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_token.h"
#include "clock.h"
#include "engine/control.h"
#include "rule.h"
#include "store_rules.h"

/* The columns of a rule as the routes answer them. */
#define RULE_COLS                                                             \
	"r.id, r.action, r.spec, r.expires_at, r.created_by, r.created_at"

/* The CTE "e" writing event type about the rule row r ($1 token id, $2
 * token name, $3 role), and the NOTIFY that wakes axd. */
#define RULE_EVENT(type)                                                      \
	"e AS (INSERT INTO event_log (event_id, type, payload) SELECT "       \
	"gen_random_uuid(), '" type "', jsonb_build_object('rule_id', r.id, " \
	"'action', r.action, 'rule', r.spec, 'token_id', "                    \
	"nullif($1::bigint, 0), 'token_name', nullif($2::text, ''), "         \
	"'token_role', $3::text, 'via', 'api') FROM r) "                      \
	"SELECT " RULE_COLS                                                   \
	" FROM r, LATERAL (SELECT pg_notify('" AX_CONTROL_CHANNEL             \
	"', '{\"op\":\"rules\"}')) n"

/* Instances a test looks at, at most. */
#define TEST_SCAN_MAX 10000

/* Adds "in_force" (the rule applies now) to each row object of rows. */
static void
add_in_force(json_t *rows)
{
	size_t  i;
	json_t *o;
	int64_t now = ax_clock_utc_us();

	json_array_foreach(rows, i, o)
	{
		ax_rule rule;
		char   *spec = json_dumps(json_object_get(o, "spec"), 0);
		int     in   = spec != NULL &&
		    ax_rule_parse_text(spec, &rule) == AX_OK &&
		    ax_rule_applies(&rule, now);
		ax_rule_fini(&rule);
		free(spec);
		json_object_set_new(o, "in_force", json_boolean(in));
	}
}

void
ax_api_rules_list(ax_api_req *q, ax_api_resp *r)
{
	PGresult *res = NULL;
	json_t   *rows;
	ax_err    rv;

	if ((rv = ax_store_query(
	         q->st, "SELECT " RULE_COLS " FROM rules r ORDER BY r.id", 0,
	         NULL, &res)) != AX_OK) {
		ax_api_reply_err(r, rv);
		return;
	}
	if ((rows = ax_api_rows_json(res)) == NULL) {
		PQclear(res);
		ax_api_reply_err(r, ax_err_set(AX_ENOMEM, "rules answer"));
		return;
	}
	PQclear(res);
	add_in_force(rows);
	ax_api_reply_json(r, 200, json_pack("{s:o}", "rules", rows));
}

/*
 * The rule in the request body, validated into *rule (ax_rule_fini it);
 * the body object (caller decrefs) or NULL after a 400 naming the member.
 */
static json_t *
body_rule(ax_api_req *q, ax_api_resp *r, ax_rule *rule)
{
	json_t *b = ax_api_body_object(q, r);

	memset(rule, 0, sizeof(*rule));
	if (b == NULL)
		return NULL;
	if (json_object_get(b, "id") != NULL) {
		ax_api_reply_error(r, 400, "invalid",
		                   "id: assigned by the server; leave it out");
		json_decref(b);
		return NULL;
	}
	if (ax_rule_parse(b, rule) != AX_OK) {
		ax_api_reply_error(r, 400, "invalid", "%s", ax_err_detail());
		ax_rule_fini(rule);
		json_decref(b);
		return NULL;
	}
	return b;
}

void
ax_api_rules_create(ax_api_req *q, ax_api_resp *r)
{
	char        ids[24], exp[24];
	const char *p[6];
	ax_rule     rule;
	json_t     *b = body_rule(q, r, &rule), *row;
	char       *spec;
	PGresult   *res = NULL;
	ax_err      rv;

	if (b == NULL)
		return;
	if ((spec = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS)) == NULL) {
		ax_api_reply_err(r, ax_err_set(AX_ENOMEM, "rule"));
		goto out;
	}
	ax_api_actor_params(q, ids, p);
	snprintf(exp, sizeof(exp), "%" PRId64, rule.expires_us);
	p[3] = rule.action == AX_RULE_ALLOW ? "allow" : "block";
	p[4] = spec;
	p[5] = exp;
	rv   = ax_store_query(
	      q->st,
	      "WITH r AS (INSERT INTO rules (action, spec, expires_at, "
	        "created_by, token_id) VALUES ($4, $5::jsonb, "
	        "ax_ts(nullif($6::bigint, 0)), $2, nullif($1::bigint, 0)) "
	        "RETURNING *), " RULE_EVENT("rule.created"),
	      6, p, &res);
	if (rv != AX_OK) {
		ax_api_reply_err(r, rv);
		goto out;
	}
	row = ax_api_rows_json(res);
	if (row == NULL || json_array_size(row) != 1) {
		json_decref(row);
		ax_api_reply_err(r, ax_err_set(AX_ENOMEM, "rule answer"));
		goto out;
	}
	add_in_force(row);
	ax_api_reply_json(r, 201, json_incref(json_array_get(row, 0)));
	json_decref(row);
out:
	PQclear(res);
	free(spec);
	ax_rule_fini(&rule);
	json_decref(b);
}

void
ax_api_rules_delete(ax_api_req *q, ax_api_resp *r)
{
	char        ids[24];
	const char *p[4];
	int64_t     id;
	PGresult   *res;

	if (!ax_api_parse_id(q->params[0], &id)) {
		ax_api_reply_error(r, 400, "invalid",
		                   "rule id must be a positive integer (see "
		                   "GET /api/v1/rules)");
		return;
	}
	ax_api_actor_params(q, ids, p);
	p[3] = q->params[0];
	res  = ax_api_query_row(
	     q, r,
	     "WITH r AS (DELETE FROM rules WHERE id = "
	      "$4::bigint RETURNING *), " RULE_EVENT("rule.deleted"),
	     4, p, "no rule %s (see GET /api/v1/rules)", q->params[0]);
	ax_api_reply_row(r, res);
}

/* ---------------------------------------------------------------------- */
/* test: which instances a rule holds now */

/* The stored rules, parsed, plus room for one more; NULL after an
 * answer. *n gets the count. */
static ax_rule *
stored_rules(ax_api_req *q, ax_api_resp *r, size_t *n)
{
	ax_rule *v;
	ax_err   rv = ax_store_rules_load(q->st, 1, &v, n, NULL);

	if (rv != AX_OK) {
		ax_api_reply_err(r, rv);
		return NULL;
	}
	return v;
}

/* One instance row as a rule target (strings borrowed from res; tags
 * from *tj, which the caller decrefs). */
static void
row_target(const PGresult *res, int i, ax_rule_target *t, json_t **tj,
           const char **tags, size_t max_tags)
{
	const char *imp = PQgetisnull(res, i, 8) ? "" : PQgetvalue(res, i, 8);
	size_t      k;
	json_t     *e;

	memset(t, 0, sizeof(*t));
	t->dag          = PQgetvalue(res, i, 1);
	t->channel      = PQgetvalue(res, i, 5);
	t->priority     = atoi(PQgetvalue(res, i, 6));
	t->worker_group = PQgetvalue(res, i, 7);
	t->impact = imp[0] == 'P' && imp[1] >= '0' && imp[1] <= '3' && !imp[2]
	    ? imp[1] - '0'
	    : -1;
	t->owner  = PQgetisnull(res, i, 9) ? NULL : PQgetvalue(res, i, 9);
	*tj       = PQgetisnull(res, i, 10)
	          ? NULL
	          : json_loads(PQgetvalue(res, i, 10), 0, NULL);
	t->tags   = tags;
	t->n_tags = 0;
	json_array_foreach(*tj, k, e)
	{
		if (json_is_string(e) && t->n_tags < max_tags)
			tags[t->n_tags++] = json_string_value(e);
	}
}

/*
 * Answers which pending and ready instances rules[cand] holds now, the
 * whole set deciding (rules[0..n) borrowed).
 */
static void
answer_test(ax_api_req *q, ax_api_resp *r, const ax_rule *rules, size_t n,
            size_t cand)
{
	PGresult *res = NULL;
	json_t   *held, *admitted;
	int64_t   now = ax_clock_utc_us();
	char      lim[16];
	ax_err    rv;
	int       rows;

	const char *p[1] = { lim };
	snprintf(lim, sizeof(lim), "%d", TEST_SCAN_MAX + 1);
	if ((rv = ax_store_query(
	         q->st,
	         "SELECT i.id, d.name, i.task, i.state, i.reason, i.channel, "
	         "i.priority, i.worker_group, v.definition->>'impact', "
	         "v.definition->>'owner', v.definition->'tags', "
	         "i.logical_time FROM task_instances i JOIN dags d ON d.id = "
	         "i.dag_id LEFT JOIN dag_versions v ON v.id = "
	         "d.active_version_id WHERE i.state IN ('PENDING', 'READY') "
	         "ORDER BY i.id LIMIT $1::int",
	         1, p, &res)) != AX_OK) {
		ax_api_reply_err(r, rv);
		return;
	}
	rows     = PQntuples(res);
	held     = json_array();
	admitted = json_array();
	for (int i = 0; i < rows && i < TEST_SCAN_MAX; i++) {
		ax_rule_target t;
		json_t        *tj;
		const char    *tags[64];
		row_target(res, i, &t, &tj, tags, 64);
		const ax_rule *by = ax_rules_decide(rules, n, &t, now, NULL);
		json_decref(tj);
		if (by != &rules[cand])
			continue;
		json_t *o = json_pack(
		    "{s:I,s:s,s:s,s:s,s:s?}", "id",
		    (json_int_t) strtoll(PQgetvalue(res, i, 0), NULL, 10),
		    "dag", PQgetvalue(res, i, 1), "task",
		    PQgetvalue(res, i, 2), "state", PQgetvalue(res, i, 3),
		    "reason",
		    PQgetisnull(res, i, 4) ? NULL : PQgetvalue(res, i, 4));
		json_array_append_new(
		    strcmp(PQgetvalue(res, i, 3), "READY") == 0 ? admitted
		                                                : held,
		    o);
	}
	ax_api_reply_json(
	    r, 200,
	    json_pack("{s:o,s:b,s:o,s:o,s:i,s:b}", "rule",
	              rules[cand].id > 0 && rules[cand].id < INT64_MAX
	                  ? json_integer(rules[cand].id)
	                  : json_null(),
	              "in_force", ax_rule_applies(&rules[cand], now),
	              "instances", held, "admitted", admitted, "scanned",
	              rows < TEST_SCAN_MAX ? rows : TEST_SCAN_MAX, "truncated",
	              rows > TEST_SCAN_MAX));
	PQclear(res);
}

void
ax_api_rules_test(ax_api_req *q, ax_api_resp *r)
{
	int64_t  id;
	size_t   n, cand;
	ax_rule *v;

	if (!ax_api_parse_id(q->params[0], &id)) {
		ax_api_reply_error(r, 400, "invalid",
		                   "rule id must be a positive integer (see "
		                   "GET /api/v1/rules)");
		return;
	}
	if ((v = stored_rules(q, r, &n)) == NULL)
		return;
	for (cand = 0; cand < n && v[cand].id != id; cand++)
		;
	if (cand == n)
		ax_api_reply_error(
		    r, 404, "not_found",
		    "no rule %" PRId64 " (see GET /api/v1/rules)", id);
	else
		answer_test(q, r, v, n, cand);
	ax_rules_free(v, n);
}

void
ax_api_rules_test_new(ax_api_req *q, ax_api_resp *r)
{
	ax_rule  rule;
	json_t  *b = body_rule(q, r, &rule);
	size_t   n;
	ax_rule *v;

	if (b == NULL)
		return;
	json_decref(b);
	if ((v = stored_rules(q, r, &n)) == NULL) {
		ax_rule_fini(&rule);
		return;
	}
	rule.id = INT64_MAX; /* named last among equals: not stored yet */
	v[n]    = rule;      /* owned by v now */
	answer_test(q, r, v, n + 1, n);
	ax_rules_free(v, n + 1);
}
