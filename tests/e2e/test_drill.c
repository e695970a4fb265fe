/*
 * test_drill.c - every `axctl drill` as an operator runs it: the real
 * axctl (in $AX_BIN_DIR) with its own embedded PostgreSQL, axd, workers
 * and ax-api on a temp home, one fault injected; the JSON report must
 * show every expected instance key executed once per attempt (nothing
 * lost, twice, stuck or contradicted by the database), a measured
 * recovery, and exit status 0.
 *
 * One test per drill, so tests/meson.build registers each drill on its
 * own (criterion --filter drill/NAME).
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"

TestSuite(drill, .timeout = 280);

/* A key completed again by a later attempt (redone) is excused only
 * where a worker died or was fenced with the result of its first attempt;
 * with every worker alive (faults of axd or PostgreSQL), a redone key is
 * a result AX acknowledged and then lost: the task ran twice. */
static int
may_redo(const char *name)
{
	return strcmp(name, "kill-worker") == 0 ||
	    strcmp(name, "kill-worker-holding") == 0 ||
	    strcmp(name, "stop-worker") == 0;
}

static void
drill(const char *name, const char *extra)
{
	static char  out[65536], err[262144];
	char         bin[4096];
	json_t      *o;
	json_error_t je;
	int          rc;

	cr_assert_not_null(getenv("AX_BIN_DIR"));
	snprintf(bin, sizeof(bin), "%s/axctl", getenv("AX_BIN_DIR"));
	rc = extra != NULL
	    ? ax_cli_run(out, sizeof(out), err, sizeof(err), bin, "drill",
	                 name, "--json", extra, "5", NULL)
	    : ax_cli_run(out, sizeof(out), err, sizeof(err), bin, "drill",
	                 name, "--json", NULL);
	o  = json_loads(out, 0, &je);
	if (o == NULL || rc != 0)
		fprintf(stderr, "---- axctl drill %s (exit %d) ----\n%s\n%s",
		        name, rc, out, err);
	cr_assert_not_null(o, "no JSON report: %s", je.text);
	cr_assert_str_eq(json_string_value(json_object_get(o, "drill")), name);
	cr_assert_gt(json_integer_value(json_object_get(o, "expected")), 10,
	             "the workload ran: %s", out);
	cr_assert_eq(json_integer_value(json_object_get(o, "lost")), 0, "%s",
	             out);
	cr_assert_eq(json_integer_value(json_object_get(o, "twice")), 0, "%s",
	             out);
	cr_assert_eq(json_integer_value(json_object_get(o, "stuck")), 0, "%s",
	             out);
	cr_assert_eq(json_integer_value(json_object_get(o, "disagree")), 0,
	             "%s", out);
	/* redone: run again by a later attempt after the first ended (its
	 * result died with its worker): once per attempt */
	cr_assert_eq(json_integer_value(json_object_get(o, "once")) +
	                 json_integer_value(json_object_get(o, "redone")),
	             json_integer_value(json_object_get(o, "expected")), "%s",
	             out);
	if (!may_redo(name))
		cr_assert_eq(
		    json_integer_value(json_object_get(o, "redone")), 0,
		    "a result was lost with every worker alive: %s", out);
	cr_assert(json_is_number(json_object_get(o, "recovery_s")),
	          "a task started after the fault: %s", out);
	cr_assert(json_is_true(json_object_get(o, "ok")), "%s", out);
	cr_assert_eq(rc, 0, "exit status 0 for a clean drill");
	json_decref(o);
}

Test(drill, kill_worker)
{
	drill("kill-worker", NULL);
}

Test(drill, kill_worker_holding)
{
	drill("kill-worker-holding", NULL);
}

Test(drill, stop_worker)
{
	drill("stop-worker", NULL);
}

Test(drill, kill_scheduler)
{
	drill("kill-scheduler", NULL);
}

Test(drill, failover)
{
	drill("failover", NULL);
}

Test(drill, restart_db)
{
	drill("restart-db", NULL);
}

/* PostgreSQL killed -9: crash recovery, the relaxed commits (admissions
 * among them) of the last moments lost; nothing may run twice or be lost
 * for it. */
Test(drill, crash_db)
{
	drill("crash-db", NULL);
}

Test(drill, stop_db)
{
	drill("stop-db", "--seconds");
}

Test(drill, commands_while_down)
{
	drill("commands-while-down", NULL);
}
