/*
 * test_rules_e2e.c - Allow/Block rules end to end with the real axd,
 * ax-worker, ax-api and axctl on a throwaway PostgreSQL:
 *  - a Block rule created through the API holds an instance already
 *    waiting at admission within 1 s (measured from the POST to the row
 *    showing "RULE_BLOCKED rule=<id>"; the test fails past 1 s and prints
 *    the figure), with an instance.blocked event naming the rule; the
 *    rule's expiry releases it without any further call;
 *  - `axctl rule add` holds a due instance before it runs (its row and
 *    `axctl rule test` name the rule), `axctl rule rm` releases it, and
 *    it runs exactly once (one attempt, one line in its mark file).
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_token.h"
#include "cli_run.h"
#include "clock.h"
#include "e2e_harness.h"

static ax_e2e *e;
static char    out[262144], err[16384];
static char    url[64], token[AX_API_TOKEN_LEN];

static void
setup(void)
{
	ax_e2e_use_axctl();
	e = NULL;
}

static void
teardown(void)
{
	ax_e2e_free(e);
	e = NULL;
}

TestSuite(rules_e2e, .init = setup, .fini = teardown, .timeout = 150);

#define AXCTL(...)         AX_CLI_AXCTL(__VA_ARGS__, NULL)
#define EXPECT_RC(rc, ...) AX_CLI_EXPECT_RC(ax_e2e_dump(e), rc, __VA_ARGS__)

/* Groups have no capacity until a worker reports: an instance of a
 * group without workers waits at admission for good. */
static void
start_stack(void)
{
	e = ax_e2e_new(1, "resources:\n  default_group_slots: 0\n");
	ax_e2e_start_axd(e);
	ax_e2e_start_workers(e);
	ax_e2e_start_api_token(e, AX_API_ROLE_OPERATOR, "rules-e2e", url,
	                       sizeof(url), token);
}

static void
trigger(const char *dag)
{
	ax_e2e_trigger(url, token, dag);
}

static const char *waiting_yaml =
    "kind: DAG\n"
    "name: e2e.rules.gpu\n"
    "impact: P3\n"
    "tasks:\n"
    "  - {name: t, command: \"true\", worker_group: nobody}\n";

Test(rules_e2e, block_takes_effect_within_a_second_and_expiry_releases)
{
	char          body[256], reason[128], want[64], exp[40];
	ax_e2e_answer a;
	int64_t       id, t0, held_us = -1;

	start_stack();
	ax_e2e_load(e, "gpu", "e2e.rules.gpu", waiting_yaml);
	trigger("e2e.rules.gpu");
	ax_e2e_wait(e, 30, "the instance to wait at admission",
	            "SELECT count(*) FROM event_log v JOIN dags d ON d.id = "
	            "v.dag_id WHERE d.name = 'e2e.rules.gpu' AND v.type = "
	            "'instance.delayed' AND v.reason = 'WAIT_RESOURCE'");
	/* and its row is written (the plan's transaction may come after the
	 * admission decision; a block's row write waits for the row) */
	ax_e2e_wait(e, 30, "the waiting instance's row",
	            "SELECT count(*) FROM task_instances i JOIN dags d ON "
	            "d.id = i.dag_id WHERE d.name = 'e2e.rules.gpu' AND "
	            "i.state = 'PENDING' AND i.reason = 'WAIT_RESOURCE'");

	/* expires 4 s from now: the release needs no call */
	snprintf(
	    body, sizeof(body),
	    "{\"action\":\"block\",\"tier\":\"P3\",\"dag\":\"e2e.rules.*\","
	    "\"expires_at\":\"%s\"}",
	    ax_e2e_at(4, exp, sizeof(exp)));
	t0 = ax_clock_mono_us();
	ax_e2e_http(url, token, "POST", "/api/v1/rules", body, strlen(body),
	            NULL, &a);
	cr_assert_eq(a.status, 201, "%s", a.body);
	id = json_integer_value(json_object_get(a.js, "id"));
	json_decref(a.js);
	snprintf(want, sizeof(want), "RULE_BLOCKED rule=%lld", (long long) id);
	while (ax_clock_mono_us() - t0 < 5 * AX_USEC_PER_SEC) {
		ax_e2e_text(
		    e, reason, sizeof(reason),
		    "SELECT i.reason FROM task_instances i JOIN dags d "
		    "ON d.id = i.dag_id WHERE d.name = "
		    "'e2e.rules.gpu'");
		if (strcmp(reason, want) == 0) {
			held_us = ax_clock_mono_us() - t0;
			break;
		}
		ax_clock_sleep_us(10 * AX_USEC_PER_MSEC);
	}
	fprintf(stderr,
	        "rules_e2e: a Block rule took effect %.1f ms after its POST "
	        "was sent (the row shows \"%s\")\n",
	        held_us / 1000.0, want);
	cr_assert(held_us >= 0, "the row never showed %s (last: '%s')", want,
	          reason);
	cr_assert_lt(held_us, AX_USEC_PER_SEC,
	             "a Block rule took %lld ms to take effect (limit 1 s)",
	             (long long) (held_us / 1000));
	ax_e2e_wait(e, 10, "an instance.blocked event naming the rule",
	            "SELECT count(*) FROM event_log WHERE type = "
	            "'instance.blocked' AND reason = 'RULE_BLOCKED' AND "
	            "(payload->>'rule_id')::bigint = %lld",
	            (long long) id);
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM event_log WHERE type = "
	                        "'rule.created' AND payload->>'token_name' = "
	                        "'rules-e2e'"),
	             1, "the rule change is an event naming the token");

	/* the expiry releases it: back to waiting for capacity */
	ax_e2e_wait(e, 15, "the expired rule to release the instance",
	            "SELECT count(*) FROM task_instances i JOIN dags d ON "
	            "d.id = i.dag_id WHERE d.name = 'e2e.rules.gpu' AND "
	            "i.state = 'PENDING' AND i.reason = 'WAIT_RESOURCE'");
}

static char mark_yaml[PATH_MAX + 256];

static json_t *
out_json(void)
{
	json_t *j = json_loads(out, 0, NULL);
	cr_assert_not_null(j, "stdout is not JSON: %s", out);
	return j;
}

Test(rules_e2e, axctl_rule_holds_a_due_instance_and_rm_runs_it_once)
{
	char    mark[PATH_MAX + 16], reason[128], want[64], ids[24];
	json_t *j;
	int64_t id;
	FILE   *f;
	int     lines = 0, ch;

	start_stack();
	snprintf(mark, sizeof(mark), "%s/etl.mark", e->st.home);
	snprintf(mark_yaml, sizeof(mark_yaml),
	         "kind: DAG\n"
	         "name: e2e.rules.etl\n"
	         "impact: P2\n"
	         "owner: ads\n"
	         "tasks:\n"
	         "  - {name: t, command: \"echo ran >> %s\"}\n",
	         mark);
	ax_e2e_load(e, "etl", "e2e.rules.etl", mark_yaml);
	EXPECT_RC(0, "rule", "add", "--block", "--owner", "ads", "--dag",
	          "e2e.rules.*", "--note", "e2e", "--json");
	j  = out_json();
	id = json_integer_value(json_object_get(j, "id"));
	json_decref(j);
	cr_assert_gt(id, 0, "%s", out);
	EXPECT_RC(0, "rule", "list");
	cr_assert(strstr(out, "owner=ads") != NULL, "%s", out);

	/* due now: held before it runs */
	trigger("e2e.rules.etl");
	snprintf(want, sizeof(want), "RULE_BLOCKED rule=%lld", (long long) id);
	ax_e2e_wait(e, 20, "the due instance to be held by the rule",
	            "SELECT count(*) FROM task_instances i JOIN dags d ON "
	            "d.id = i.dag_id WHERE d.name = 'e2e.rules.etl' AND "
	            "i.reason = '%s'",
	            want);
	snprintf(ids, sizeof(ids), "%lld", (long long) id);
	EXPECT_RC(0, "rule", "test", ids, "--json");
	j = out_json();
	cr_assert_eq(json_array_size(json_object_get(j, "instances")), 1,
	             "rule test names the held instance: %s", out);
	json_decref(j);
	ax_clock_sleep_us(1500 * AX_USEC_PER_MSEC);
	cr_assert_eq(ax_e2e_int(e, "SELECT count(*) FROM attempts"), 0,
	             "an attempt was made while the rule held the instance");
	ax_e2e_text(e, reason, sizeof(reason),
	            "SELECT state || ' ' || reason FROM task_instances");
	snprintf(mark_yaml, sizeof(mark_yaml), "PENDING %s", want);
	cr_assert_str_eq(reason, mark_yaml);

	EXPECT_RC(0, "rule", "rm", ids);
	ax_e2e_wait(e, 20, "the released instance to succeed",
	            "SELECT count(*) FROM task_instances WHERE state = "
	            "'SUCCESS'");
	ax_clock_sleep_us(1000 * AX_USEC_PER_MSEC);
	cr_assert_eq(ax_e2e_int(e, "SELECT count(*) FROM attempts"), 1,
	             "released: exactly one attempt");
	cr_assert_not_null(f = fopen(mark, "r"), "%s", mark);
	while ((ch = fgetc(f)) != EOF)
		lines += ch == '\n';
	fclose(f);
	cr_assert_eq(lines, 1, "the task ran %d times", lines);
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM event_log WHERE type = "
	                        "'rule.deleted' AND payload->>'token_name' = "
	                        "'rules-e2e'"),
	             1);
	EXPECT_RC(2, "rule", "rm", "abc");
	EXPECT_RC(1, "rule", "rm", ids); /* gone: 404 */
	EXPECT_RC(2, "rule", "add", "--dag", "x");
	EXPECT_RC(1, "rule", "add", "--block", "--tier", "P7");
	cr_assert(strstr(err, "tier") != NULL, "%s", err);
}
