/*
 * test_api_rules.c - the Allow/Block rule routes of ax-api over real HTTP
 * against a real PostgreSQL (tests/api_fixture.h): create, list and delete
 * with their roles; the rule.created / rule.deleted events naming the
 * token; the NOTIFY that wakes axd committed with the change; every bad
 * rule a 400 naming the member; and the test routes answering which
 * pending and ready instances a rule holds, the whole set deciding.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "api_fixture.h"
#include "log.h"
#include "store_rules.h"

static ax_api_fixture     fx;
static ax_api_fixture_ans an;

static void
setup(void)
{
	ax_log_init(AX_LOG_ERROR, 2);
	ax_api_fixture_start(&fx, 0);
}

static void
teardown(void)
{
	ax_api_fixture_ans_fini(&an);
	ax_api_fixture_stop(&fx);
}

TestSuite(api_rules, .init = setup, .fini = teardown, .timeout = 120);

static long
req(const char *method, const char *path, const char *token, const char *body)
{
	return ax_api_fixture_req(&fx, method, path, token, body, &an);
}

static void
expect_error(long got, long status, const char *code, const char *what)
{
	const char *e = json_string_value(json_object_get(an.json, "error"));
	cr_expect_eq(got, status, "%s: status %ld, want %ld: %s", what, got,
	             status, an.raw);
	cr_expect_str_eq(e ? e : "", code, "%s: %s", what, an.raw);
}

/* Waits for the {"op":"rules"} notification. */
static void
expect_notify(const char *what)
{
	json_t *n = ax_api_fixture_notify(&fx);
	cr_assert_not_null(n, "%s: no notification", what);
	cr_assert_str_eq(json_string_value(json_object_get(n, "op")), "rules",
	                 "%s", what);
	json_decref(n);
}

Test(api_rules, create_list_delete_with_roles_events_and_notify)
{
	const char *rule = "{\"action\":\"block\",\"tier\":\"P3\",\"window\":{"
	                   "\"tz\":\"Asia/Shanghai\",\"start\":\"20:00\","
	                   "\"end\":\"23:00\"},\"note\":\"promo\"}";
	char        path[64];
	int64_t     id;

	ax_api_fixture_drain(&fx);
	expect_error(req("POST", "/api/v1/rules", fx.viewer, rule), 403,
	             "forbidden", "viewer creates");
	expect_error(req("POST", "/api/v1/rules", NULL, rule), 401,
	             "unauthorized", "no token");
	cr_assert_eq(req("POST", "/api/v1/rules", fx.oper, rule), 201, "%s",
	             an.raw);
	id = json_integer_value(json_object_get(an.json, "id"));
	cr_assert_gt(id, 0);
	cr_expect_str_eq(json_string_value(json_object_get(an.json, "action")),
	                 "block");
	cr_expect(json_is_boolean(json_object_get(an.json, "in_force")));
	cr_expect_str_eq(json_string_value(json_object_get(
	                     json_object_get(an.json, "spec"), "note")),
	                 "promo");
	cr_expect_str_eq(
	    json_string_value(json_object_get(an.json, "created_by")), "o");
	expect_notify("create");
	cr_expect_eq(
	    ax_api_fixture_int(&fx,
	                       "SELECT count(*) FROM event_log WHERE type = "
	                       "'rule.created' AND payload->>'token_name' = "
	                       "'o' AND (payload->>'rule_id')::bigint = %lld "
	                       "AND payload->'rule'->>'tier' = 'P3'",
	                       (long long) id),
	    1, "rule.created names who made it");

	cr_assert_eq(req("GET", "/api/v1/rules", fx.viewer, NULL), 200, "%s",
	             an.raw);
	json_t *rules = json_object_get(an.json, "rules");
	cr_assert_eq(json_array_size(rules), 1, "%s", an.raw);
	cr_expect_eq(json_integer_value(
	                 json_object_get(json_array_get(rules, 0), "id")),
	             id);

	snprintf(path, sizeof(path), "/api/v1/rules/%lld", (long long) id);
	expect_error(req("DELETE", path, fx.viewer, NULL), 403, "forbidden",
	             "viewer deletes");
	cr_assert_eq(req("DELETE", path, fx.oper, NULL), 200, "%s", an.raw);
	cr_expect_eq(json_integer_value(json_object_get(an.json, "id")), id);
	expect_notify("delete");
	cr_expect_eq(
	    ax_api_fixture_int(&fx,
	                       "SELECT count(*) FROM event_log WHERE type = "
	                       "'rule.deleted' AND payload->>'token_name' = "
	                       "'o' AND (payload->>'rule_id')::bigint = %lld",
	                       (long long) id),
	    1, "rule.deleted names who made it");
	expect_error(req("DELETE", path, fx.oper, NULL), 404, "not_found",
	             "deleted twice");
	expect_error(req("DELETE", "/api/v1/rules/abc", fx.oper, NULL), 400,
	             "invalid", "bad id");
	cr_assert_eq(req("GET", "/api/v1/rules", fx.viewer, NULL), 200);
	cr_expect_eq(json_array_size(json_object_get(an.json, "rules")), 0);
	cr_expect_eq(ax_api_fixture_int(&fx, "SELECT count(*) FROM rules"), 0);
}

typedef struct bad_body {
	char body[200];
	char detail[64]; /* a substring of the detail */
} bad_body;

static bad_body bads[] = {
	{ "[1]", "" },
	{ "{\"tier\":\"P3\"}", "action: required" },
	{ "{\"action\":\"block\"}", "at least one of channel" },
	{ "{\"action\":\"block\",\"tier\":\"P9\"}", "tier: \"P9\"" },
	{ "{\"action\":\"block\",\"dag\":\"x\",\"id\":4}",
	  "id: assigned by the server" },
	{ "{\"action\":\"block\",\"dag\":\"x\",\"colour\":1}",
	  "colour: unknown member" },
	{ "{\"action\":\"block\",\"dag\":\"x\",\"window\":{\"start\":\"20:"
	  "00\",\"end\":\"24:00\"}}",
	  "window.end: \"24:00\"" },
	{ "{\"action\":\"block\",\"dag\":\"x\",\"window\":{\"start\":\"20:"
	  "00\",\"end\":\"21:00\",\"tz\":\"Mars/Olympus\"}}",
	  "window.tz" },
	{ "{\"action\":\"block\",\"dag\":\"x\",\"expires_at\":\"soon\"}",
	  "expires_at" },
	{ "{\"action\":\"block\",\"channel\":\"gpu\"}", "channel: \"gpu\"" },
};

ParameterizedTestParameters(api_rules, bad_bodies)
{
	return cr_make_param_array(bad_body, bads,
	                           sizeof(bads) / sizeof(bads[0]));
}

ParameterizedTest(bad_body *b, api_rules, bad_bodies)
{
	const char *d;

	expect_error(req("POST", "/api/v1/rules", fx.oper, b->body), 400,
	             "invalid", b->body);
	d = json_string_value(json_object_get(an.json, "detail"));
	cr_expect(d != NULL && strstr(d, b->detail) != NULL,
	          "%s: detail %s does not say \"%s\"", b->body, an.raw,
	          b->detail);
	expect_error(req("POST", "/api/v1/rules/test", fx.viewer, b->body),
	             400, "invalid", b->body);
	cr_expect_eq(ax_api_fixture_int(&fx, "SELECT count(*) FROM rules"), 0);
}

/* Two DAGs, etl.orders (P3, owner ads, tag promo) and core.kpi (P0):
 * one PENDING and one READY instance each. */
static void
seed(void)
{
	static const char *yaml =
	    "kind: DAG\nname: etl.orders\nimpact: P3\nowner: ads\n"
	    "tags: [promo]\nschedule: {cron: \"0 0 * * * ?\"}\ntasks:\n"
	    "  - {name: a, type: bash, command: \"echo a\"}\n"
	    "  - {name: b, type: bash, command: \"echo b\"}\n"
	    "---\n"
	    "kind: DAG\nname: core.kpi\nimpact: P0\nowner: bi\n"
	    "schedule: {cron: \"0 0 * * * ?\"}\ntasks:\n"
	    "  - {name: a, type: bash, command: \"echo a\"}\n"
	    "  - {name: b, type: bash, command: \"echo b\"}\n";

	cr_assert_eq(req("POST", "/api/v1/dags", fx.admin, yaml), 201, "%s",
	             an.raw);
	ax_api_fixture_sql(
	    &fx,
	    "INSERT INTO dag_runs (dag_id, dag_version_id, run_type, "
	    "logical_date, interval_start, interval_end) SELECT id, "
	    "active_version_id, 'manual', ax_ts(0), ax_ts(0), ax_ts(0) "
	    "FROM dags");
	ax_api_fixture_sql(
	    &fx,
	    "INSERT INTO task_instances (dag_run_id, dag_id, task, "
	    "logical_time, state, reason) SELECT r.id, r.dag_id, t.task, "
	    "r.logical_date, t.state, t.reason FROM dag_runs r, (VALUES "
	    "('a', 'PENDING', 'WAIT_RESOURCE'), ('b', 'READY', NULL)) "
	    "AS t(task, state, reason)");
}

/* The "dag.task" names of the array member key of the last answer,
 * comma-separated, in order. */
static void
names(const char *key, char *buf, size_t len)
{
	json_t *a = json_object_get(an.json, key), *e;
	size_t  i, used = 0;

	buf[0] = '\0';
	json_array_foreach(a, i, e)
	{
		used += (size_t) snprintf(
		    buf + used, len - used, "%s%s.%s", i ? "," : "",
		    json_string_value(json_object_get(e, "dag")),
		    json_string_value(json_object_get(e, "task")));
		if (used >= len)
			break;
	}
}

Test(api_rules, test_routes_say_what_a_rule_holds)
{
	char    got[256], path[64];
	int64_t block, allow;

	seed();
	/* a candidate: nothing stored */
	cr_assert_eq(req("POST", "/api/v1/rules/test", fx.viewer,
	                 "{\"action\":\"block\",\"tier\":\"P3\"}"),
	             200, "%s", an.raw);
	names("instances", got, sizeof(got));
	cr_expect_str_eq(got, "etl.orders.a", "%s", an.raw);
	names("admitted", got, sizeof(got));
	cr_expect_str_eq(got, "etl.orders.b", "%s", an.raw);
	cr_expect(json_is_true(json_object_get(an.json, "in_force")));
	cr_expect(json_is_null(json_object_get(an.json, "rule")));
	cr_expect_eq(ax_api_fixture_int(&fx, "SELECT count(*) FROM rules"), 0);

	/* stored: owner ads holds etl.orders; a tag allow carves it out */
	cr_assert_eq(req("POST", "/api/v1/rules", fx.oper,
	                 "{\"action\":\"block\",\"owner\":\"ads\"}"),
	             201, "%s", an.raw);
	block = json_integer_value(json_object_get(an.json, "id"));
	snprintf(path, sizeof(path), "/api/v1/rules/%lld/test",
	         (long long) block);
	cr_assert_eq(req("GET", path, fx.viewer, NULL), 200, "%s", an.raw);
	names("instances", got, sizeof(got));
	cr_expect_str_eq(got, "etl.orders.a", "%s", an.raw);
	cr_expect_eq(json_integer_value(json_object_get(an.json, "rule")),
	             block);

	cr_assert_eq(req("POST", "/api/v1/rules", fx.oper,
	                 "{\"action\":\"allow\",\"owner\":\"ads\",\"tag\":"
	                 "\"promo\"}"),
	             201, "%s", an.raw);
	allow = json_integer_value(json_object_get(an.json, "id"));
	cr_assert_gt(allow, block);
	cr_assert_eq(req("GET", path, fx.viewer, NULL), 200, "%s", an.raw);
	names("instances", got, sizeof(got));
	cr_expect_str_eq(got, "", "the allow outranks the block: %s", an.raw);

	/* a channel block holds every Px instance pending but the ones the
	 * more specific allow (owner + tag) spares */
	cr_assert_eq(req("POST", "/api/v1/rules/test", fx.viewer,
	                 "{\"action\":\"block\",\"channel\":\"Px\"}"),
	             200, "%s", an.raw);
	names("instances", got, sizeof(got));
	cr_expect_str_eq(got, "core.kpi.a", "%s", an.raw);
	snprintf(path, sizeof(path), "/api/v1/rules/%lld", (long long) allow);
	cr_assert_eq(req("DELETE", path, fx.oper, NULL), 200, "%s", an.raw);
	cr_assert_eq(req("POST", "/api/v1/rules/test", fx.viewer,
	                 "{\"action\":\"block\",\"channel\":\"Px\"}"),
	             200, "%s", an.raw);
	names("instances", got, sizeof(got));
	cr_expect(strstr(got, "core.kpi.a") != NULL &&
	              json_array_size(json_object_get(an.json, "instances")) ==
	                  1,
	          "the owner block (lower id, equal specificity) is named "
	          "for etl.orders: %s",
	          an.raw);

	/* a closed window holds nothing now */
	cr_assert_eq(req("POST", "/api/v1/rules/test", fx.viewer,
	                 "{\"action\":\"block\",\"dag\":\"core.*\","
	                 "\"expires_at\":\"2000-01-01T00:00:00Z\"}"),
	             200, "%s", an.raw);
	cr_expect(json_is_false(json_object_get(an.json, "in_force")));
	names("instances", got, sizeof(got));
	cr_expect_str_eq(got, "", "%s", an.raw);

	expect_error(req("GET", "/api/v1/rules/999/test", fx.viewer, NULL),
	             404, "not_found", "no such rule");
}

/* A row written around ax-api that does not parse is skipped by every
 * reader (axd's resource detector reads with the same function): listed
 * as not in force, never deciding. */
Test(api_rules, a_row_that_does_not_parse_is_skipped)
{
	ax_rule *v = NULL;
	size_t   n = 0, skipped = 0;

	seed();
	ax_api_fixture_sql(&fx,
	                   "INSERT INTO rules (action, spec) VALUES "
	                   "('block', '{\"action\":\"block\",\"tier\":"
	                   "\"P9\"}'), ('block', '{\"action\":\"block\","
	                   "\"dag\":\"core.*\"}')");
	cr_assert_eq(ax_store_rules_load(fx.st, 0, &v, &n, &skipped), AX_OK,
	             "%s", ax_err_detail());
	cr_expect_eq(n, 1);
	cr_expect_eq(skipped, 1);
	cr_expect_str_eq(v[0].dag, "core.*");
	ax_rules_free(v, n);
	cr_assert_eq(req("GET", "/api/v1/rules", fx.viewer, NULL), 200, "%s",
	             an.raw);
	json_t *rules = json_object_get(an.json, "rules");
	cr_assert_eq(json_array_size(rules), 2, "%s", an.raw);
	cr_expect(json_is_false(
	    json_object_get(json_array_get(rules, 0), "in_force")));
	cr_expect(json_is_true(
	    json_object_get(json_array_get(rules, 1), "in_force")));
	cr_assert_eq(req("POST", "/api/v1/rules/test", fx.viewer,
	                 "{\"action\":\"block\",\"tier\":\"P3\"}"),
	             200, "%s", an.raw);
	char got[256];
	names("instances", got, sizeof(got));
	cr_expect_str_eq(got, "etl.orders.a", "%s", an.raw);
}
