/*
 * test_sink_alert.c - the pure half of the alert sink
 * (actors/sinks/sink_alert.h): which events alert, with which labels and
 * annotations, and the errors for bad alerts.* values.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <jansson.h>
#include <string.h>

#include "ax_err.h"
#include "sink_alert.h"

static Ax__Event
event(const char *type, const char *task, int attempt, const char *reason)
{
	Ax__Event e   = AX__EVENT__INIT;
	e.type        = (char *) type;
	e.time_us     = 1767225600123456LL; /* 2026-01-01T00:00:00.123456Z */
	e.dag         = "pay.settle";
	e.dag_run_id  = 42;
	e.task        = (char *) (task != NULL ? task : "");
	e.instance_id = task != NULL ? 7 : 0;
	e.attempt     = attempt;
	e.reason      = (char *) (reason != NULL ? reason : "");
	return e;
}

/* Strings are arrays: criterion runs each case in a new process of
 * this (position-independent) binary, where a pointer into the parent's
 * rodata would not be valid. "" stands for none. */
typedef struct {
	char            type[32];
	char            task[8];
	int             attempt, max_tries;
	char            reason[24];
	ax_alert_action want;
	char            alertname[24], want_reason[24];
} map_case;

static map_case cases[] = {
	/* the last attempt of three fails: page */
	{ "instance.failed", "load", 3, 3, "EXIT_CODE", AX_ALERT_FIRE,
	  "AxTaskFailed", "EXIT_CODE" },
	/* an earlier one: the retry may still succeed, nobody is paged */
	{ "instance.failed", "load", 1, 3, "EXIT_CODE", AX_ALERT_NONE, "",
	  "" },
	/* retries unknown (version not readable): alert */
	{ "instance.failed", "load", 1, 0, "", AX_ALERT_FIRE, "AxTaskFailed",
	  "FAILED" },
	/* a timeout alerts on any attempt */
	{ "instance.timeout", "load", 1, 3, "", AX_ALERT_FIRE, "AxTaskTimeout",
	  "TIMEOUT_EXEC" },
	{ "instance.deadline_missed", "load", 1, 1, "DEADLINE_MISSED",
	  AX_ALERT_FIRE, "AxDeadlineMissed", "DEADLINE_MISSED" },
	{ "run.deadline_missed", "", 0, 0, "DEADLINE_MISSED", AX_ALERT_FIRE,
	  "AxDeadlineMissed", "DEADLINE_MISSED" },
	{ "instance.succeeded", "load", 2, 3, "", AX_ALERT_RESOLVE, "", "" },
	{ "instance.running", "load", 1, 3, "", AX_ALERT_NONE, "", "" },
	{ "instance.pending", "load", 1, 3, "RETRY_SCHEDULED", AX_ALERT_NONE,
	  "", "" },
	{ "run.failed", "", 0, 0, "", AX_ALERT_NONE, "", "" },
};

ParameterizedTestParameters(sink_alert, map)
{
	return cr_make_param_array(map_case, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

static const char *
label(json_t *a, const char *k)
{
	return json_string_value(
	    json_object_get(json_object_get(a, "labels"), k));
}

ParameterizedTest(map_case *k, sink_alert, map)
{
	Ax__Event e =
	    event(k->type, k->task[0] ? k->task : NULL, k->attempt, k->reason);
	ax_alert_dag d = { .owner     = "team-pay",
		           .impact    = 0,
		           .max_tries = k->max_tries };
	json_t      *a = NULL;

	cr_assert_eq(ax_sink_alert_map(&e, &d, "", &a), k->want, "%s",
	             k->type);
	if (k->want != AX_ALERT_FIRE) {
		cr_assert_null(a);
		return;
	}
	cr_assert_not_null(a);
	cr_assert_str_eq(label(a, "alertname"), k->alertname);
	cr_assert_str_eq(label(a, "reason"), k->want_reason);
	cr_assert_str_eq(label(a, "impact"), "P0");
	cr_assert_str_eq(label(a, "severity"), "critical");
	cr_assert_str_eq(label(a, "owner"), "team-pay");
	cr_assert_str_eq(label(a, "dag"), "pay.settle");
	if (k->task[0] != '\0')
		cr_assert_str_eq(label(a, "task"), k->task);
	else
		cr_assert_null(label(a, "task"), "no empty label");
	cr_assert_str_eq(json_string_value(json_object_get(a, "startsAt")),
	                 "2026-01-01T00:00:00.123456Z");
	cr_assert_null(json_object_get(a, "endsAt"), "firing: no endsAt");
	json_decref(a);
}

Test(sink_alert, annotations_name_the_explain_command_and_link)
{
	Ax__Event    e = event("instance.failed", "load", 2, "EXIT_CODE");
	ax_alert_dag d = { .owner = NULL, .impact = 3, .max_tries = 2 };
	json_t      *a = NULL;

	cr_assert_eq(ax_sink_alert_map(&e, &d, "https://ax.example.com", &a),
	             AX_ALERT_FIRE);
	json_t *ann = json_object_get(a, "annotations");
	cr_assert_str_eq(json_string_value(json_object_get(ann, "explain")),
	                 "axctl explain instance 7");
	cr_assert_str_eq(json_string_value(json_object_get(ann, "link")),
	                 "https://ax.example.com/api/v1/instances/7/explain");
	cr_assert_str_eq(json_string_value(json_object_get(a, "generatorURL")),
	                 "https://ax.example.com/api/v1/instances/7/explain");
	cr_assert_not_null(
	    strstr(json_string_value(json_object_get(ann, "summary")),
	           "pay.settle.load failed after its last attempt (2)"));
	cr_assert_str_eq(label(a, "impact"), "P3");
	cr_assert_str_eq(label(a, "severity"), "info");
	cr_assert_null(label(a, "owner"), "unknown owner: no label");
	json_decref(a);

	/* a DAG the registry does not know: P2, warning */
	d = (ax_alert_dag) { .impact = -1 };
	cr_assert_eq(ax_sink_alert_map(&e, &d, "", &a), AX_ALERT_FIRE);
	cr_assert_str_eq(label(a, "impact"), "P2");
	cr_assert_str_eq(label(a, "severity"), "warning");
	cr_assert_null(json_object_get(a, "generatorURL"));
	json_decref(a);
}

typedef struct {
	char   am[32], wh[32], link[24];
	size_t cap;
	ax_err want;
	char   detail[128]; /* part of the error detail; "": none */
} check_case;

static check_case checks[] = {
	{ "http://127.0.0.1:9093", "", "", 10, AX_OK, "" },
	{ "", "https://hooks.example.com/ax", "", 10, AX_OK, "" },
	{ "", "", "", 10, AX_ENOENT, "no target" },
	{ "127.0.0.1:9093", "", "", 10, AX_EINVAL,
	  "alerts.alertmanager_url \"127.0.0.1:9093\" is not an http:// or "
	  "https:// URL; write Alertmanager's base URL" },
	{ "", "ftp://x", "", 10, AX_EINVAL, "alerts.webhook_url \"ftp://x\"" },
	{ "http://am", "", "ax.example.com", 10, AX_EINVAL,
	  "alerts.link_url \"ax.example.com\"" },
	{ "http://am", "", "", 0, AX_EINVAL,
	  "alerts.buffer must be at least 1" },
};

ParameterizedTestParameters(sink_alert, check)
{
	return cr_make_param_array(check_case, checks,
	                           sizeof(checks) / sizeof(checks[0]));
}

ParameterizedTest(check_case *k, sink_alert, check)
{
	ax_sink_alert_config cfg = { .alertmanager_url = k->am,
		                     .webhook_url      = k->wh,
		                     .link_url         = k->link,
		                     .capacity         = k->cap };
	cr_assert_eq(ax_sink_alert_check(&cfg), k->want, "%s",
	             ax_err_detail());
	if (k->detail[0] != '\0')
		cr_assert_not_null(strstr(ax_err_detail(), k->detail), "%s",
		                   ax_err_detail());
}

Test(sink_alert, stuck_instance_alert)
{
	ax_store_stuck x = { .instance_id = 9,
		             .dag_run_id  = 4,
		             .since_us    = 1767225600000000LL,
		             .try_number  = 2,
		             .state       = "RUNNING",
		             .dag         = "pay.settle",
		             .task        = "load" };
	ax_alert_dag   d = { .owner = "team-pay", .impact = 1 };
	json_t        *a = ax_sink_alert_stuck_json(&x, &d, 3600000000LL, "");

	cr_assert_not_null(a);
	cr_assert_str_eq(label(a, "alertname"), "AxInstanceStuck");
	cr_assert_str_eq(label(a, "reason"), "STUCK_RUNNING");
	cr_assert_str_eq(label(a, "impact"), "P1");
	cr_assert_str_eq(label(a, "severity"), "error");
	cr_assert_str_eq(label(a, "owner"), "team-pay");
	cr_assert_str_eq(label(a, "task"), "load");
	/* it became stuck an hour after its last change */
	cr_assert_str_eq(json_string_value(json_object_get(a, "startsAt")),
	                 "2026-01-01T01:00:00.000000Z");
	cr_assert_str_eq(json_string_value(json_object_get(
	                     json_object_get(a, "annotations"), "explain")),
	                 "axctl explain instance 9");
	json_decref(a);
}

Test(sink_alert, scheduler_alert_labels_match_for_the_resolution)
{
	json_t *a = ax_sink_alert_scheduler_json("LEASE_LOST", "axd h pid 1",
	                                         "lost", 1767225600000000LL);
	json_t *b = ax_sink_alert_scheduler_json("LEASE_LOST", "axd h pid 1",
	                                         "scheduling again",
	                                         1767225700000000LL);

	cr_assert_str_eq(label(a, "alertname"), "AxSchedulerNoLease");
	cr_assert_str_eq(label(a, "impact"), "P0");
	cr_assert_str_eq(label(a, "severity"), "critical");
	cr_assert_str_eq(label(a, "instance"), "axd h pid 1");
	cr_assert_null(label(a, "dag"));
	cr_assert(json_equal(json_object_get(a, "labels"),
	                     json_object_get(b, "labels")),
	          "Alertmanager matches a resolution by its labels");
	json_decref(a);
	json_decref(b);
}
