/*
 * test_control.c - decoding of ax_control payloads (actors/control.h):
 * each op reaches the right actor with its fields; every malformed
 * payload is refused with a detail naming what is wrong.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <string.h>

#include "actors/control.h"
#include "commands.pb-c.h"

static Ax__Command *
decode(const char *json, ax_control_msg *m)
{
	ax_err rv = ax_control_decode(json, m);
	cr_assert_eq(rv, AX_OK, "%s: %s", json, ax_err_detail());
	Ax__Command *c = ax__command__unpack(NULL, m->len, m->cmd);
	cr_assert_not_null(c);
	cr_assert_eq(strlen(c->trace_id), 32, "a 32-hex trace id");
	cr_assert_gt(c->issued_at_us, 0);
	return c;
}

Test(control, dag_ops_go_to_the_loader)
{
	static const char *const ops[] = { "dag_changed", "paused",
		                           "unpaused" };
	for (size_t i = 0; i < 3; i++) {
		char           json[128];
		ax_control_msg m;
		snprintf(json, sizeof(json),
		         "{\"op\":\"%s\",\"dag\":\"d.1\",\"extra\":1}",
		         ops[i]);
		Ax__Command *c = decode(json, &m);
		cr_assert_str_eq(m.dest[0], "dag_loader");
		cr_assert_null(m.dest[1]);
		cr_assert_eq(c->body_case, AX__COMMAND__BODY_CONTROL);
		cr_assert_str_eq(c->control->op, ops[i]);
		cr_assert_str_eq(c->control->dag, "d.1");
		ax__command__free_unpacked(c, NULL);
		ax_control_msg_fini(&m);
	}
}

Test(control, trigger_goes_to_the_time_detector)
{
	ax_control_msg m;
	Ax__Command   *c = decode("{\"op\":\"trigger\",\"dag\":\"d\","
	                            "\"logical_date_us\":1700000000000000,"
	                            "\"params\":{\"b\":2,\"a\":\"x\"}}",
	                          &m);
	cr_assert_str_eq(m.dest[0], "time_detector");
	cr_assert_eq(c->control->logical_date_us, 1700000000000000LL);
	cr_assert_str_eq(c->control->params_json, "{\"a\":\"x\",\"b\":2}");
	ax__command__free_unpacked(c, NULL);
	ax_control_msg_fini(&m);

	c = decode("{\"op\":\"trigger\",\"dag\":\"d\"}", &m);
	cr_assert_eq(c->control->logical_date_us, 0, "absent: now");
	cr_assert_str_eq(c->control->params_json, "");
	ax__command__free_unpacked(c, NULL);
	ax_control_msg_fini(&m);
}

Test(control, kill_cancels_through_the_instance_generator)
{
	ax_control_msg m;
	Ax__Command   *c = decode("{\"op\":\"kill\",\"instance_id\":42}", &m);
	cr_assert_str_eq(m.dest[0], "instance_generator",
	                 "which forwards to queue");
	cr_assert_null(m.dest[1]);
	cr_assert_eq(c->body_case, AX__COMMAND__BODY_CANCEL_INSTANCE);
	cr_assert_eq(c->cancel_instance->instance->instance_id, 42);
	cr_assert_str_eq(c->cancel_instance->reason, "MANUAL_KILL");
	ax__command__free_unpacked(c, NULL);
	ax_control_msg_fini(&m);
}

Test(control, clear_mark_backfill_go_to_the_dependency_detector)
{
	ax_control_msg m;
	Ax__Command   *c = decode(
	      "{\"op\":\"clear\",\"instance_id\":7,\"downstream\":true}", &m);
	cr_assert_str_eq(m.dest[0], "dependency_detector");
	cr_assert_eq(c->control->instance_id, 7);
	cr_assert(c->control->downstream);
	ax__command__free_unpacked(c, NULL);
	ax_control_msg_fini(&m);

	c = decode("{\"op\":\"clear\",\"instance_id\":7}", &m);
	cr_assert_not(c->control->downstream, "downstream defaults to false");
	ax__command__free_unpacked(c, NULL);
	ax_control_msg_fini(&m);

	c = decode("{\"op\":\"mark\",\"instance_id\":9,\"state\":\"SUCCESS\"}",
	           &m);
	cr_assert_str_eq(m.dest[0], "dependency_detector");
	cr_assert_str_eq(c->control->op, "mark");
	cr_assert_str_eq(c->control->state, "SUCCESS");
	ax__command__free_unpacked(c, NULL);
	ax_control_msg_fini(&m);

	c = decode("{\"op\":\"backfill\",\"dag\":\"d\",\"mode\":\"serial\","
	           "\"run_ids\":[3,1,2]}",
	           &m);
	cr_assert_str_eq(m.dest[0], "dependency_detector");
	cr_assert_str_eq(c->control->mode, "serial");
	cr_assert_eq(c->control->n_run_ids, 3);
	cr_assert_eq(c->control->run_ids[0], 3, "order kept");
	cr_assert_eq(c->control->run_ids[2], 2);
	ax__command__free_unpacked(c, NULL);
	ax_control_msg_fini(&m);
}

Test(control, resync_goes_to_the_loader)
{
	ax_control_msg m;
	Ax__Command   *c = decode("{\"op\":\"resync\"}", &m);
	cr_assert_str_eq(m.dest[0], "dag_loader");
	cr_assert_str_eq(c->control->op, "resync");
	ax__command__free_unpacked(c, NULL);
	ax_control_msg_fini(&m);
}

Test(control, rules_go_to_the_resource_detector)
{
	ax_control_msg m;
	Ax__Command   *c = decode("{\"op\":\"rules\"}", &m);
	cr_assert_str_eq(m.dest[0], "resource_detector");
	cr_assert_null(m.dest[1]);
	cr_assert_str_eq(c->control->op, "rules");
	cr_assert_str_eq(m.op, "rules");
	ax__command__free_unpacked(c, NULL);
	ax_control_msg_fini(&m);
}

Test(control, pressure_goes_to_the_resource_detector)
{
	ax_control_msg m;
	Ax__Command   *c = decode("{\"op\":\"pressure\"}", &m);
	cr_assert_str_eq(m.dest[0], "resource_detector");
	cr_assert_null(m.dest[1]);
	cr_assert_str_eq(c->control->op, "pressure");
	cr_assert_str_eq(m.op, "pressure");
	ax__command__free_unpacked(c, NULL);
	ax_control_msg_fini(&m);
}

/* A capacity calendar changed (ax-api's NOTIFY): the resource detector
 * reads capacity_calendars again, and the queue (it stops work beyond a
 * calendar that preempts); the op's name survives the decode (it was
 * "?" before it was listed, and nothing reloaded). */
Test(control, calendar_goes_to_the_resource_detector_and_the_queue)
{
	ax_control_msg m;
	Ax__Command   *c = decode("{\"op\":\"calendar\"}", &m);
	cr_assert_str_eq(m.dest[0], "resource_detector");
	cr_assert_str_eq(m.dest[1], "queue");
	cr_assert_str_eq(c->control->op, "calendar");
	cr_assert_str_eq(m.op, "calendar");
	ax__command__free_unpacked(c, NULL);
	ax_control_msg_fini(&m);
}

struct bad_case {
	char json[160];
	char detail[96]; /* a substring of the error detail */
};

ParameterizedTestParameters(control, malformed)
{
	static struct bad_case cases[] = {
		{ "", "not JSON" },
		{ "{\"op\":\"paused\"", "not JSON" },
		{ "[1,2]", "must be a JSON object" },
		{ "{}", "\"op\" must be a non-empty string" },
		{ "{\"op\":3}", "\"op\" must be a non-empty string" },
		{ "{\"op\":\"nope\"}", "unknown op 'nope'" },
		{ "{\"op\":\"dag_changed\"}", "\"dag\" must be a non-empty" },
		{ "{\"op\":\"paused\",\"dag\":\"\"}", "\"dag\" must be" },
		{ "{\"op\":\"unpaused\",\"dag\":5}", "\"dag\" must be" },
		{ "{\"op\":\"trigger\"}", "\"dag\" must be" },
		{ "{\"op\":\"trigger\",\"dag\":\"d\",\"logical_date_us\":-1}",
		  "\"logical_date_us\" must be an integer >= 0" },
		{ "{\"op\":\"trigger\",\"dag\":\"d\",\"logical_date_us\":"
		  "\"x\"}",
		  "\"logical_date_us\"" },
		{ "{\"op\":\"trigger\",\"dag\":\"d\",\"params\":[1]}",
		  "\"params\" must be an object" },
		{ "{\"op\":\"kill\"}", "\"instance_id\" must be a positive" },
		{ "{\"op\":\"kill\",\"instance_id\":0}", "\"instance_id\"" },
		{ "{\"op\":\"kill\",\"instance_id\":\"4\"}",
		  "\"instance_id\"" },
		{ "{\"op\":\"clear\",\"instance_id\":1,\"downstream\":1}",
		  "\"downstream\" must be true or false" },
		{ "{\"op\":\"mark\",\"instance_id\":1}", "\"state\" must be" },
		{ "{\"op\":\"mark\",\"instance_id\":1,\"state\":\"RUNNING\"}",
		  "\"SUCCESS\" or \"FAILED\", not \"RUNNING\"" },
		{ "{\"op\":\"backfill\",\"dag\":\"d\",\"mode\":\"x\","
		  "\"run_ids\":[1]}",
		  "\"mode\" must be \"serial\" or \"parallel\"" },
		{ "{\"op\":\"backfill\",\"dag\":\"d\",\"run_ids\":[]}",
		  "\"run_ids\" must be a non-empty array" },
		{ "{\"op\":\"backfill\",\"dag\":\"d\",\"run_ids\":[1,-2]}",
		  "\"run_ids\"[1] must be a positive integer" },
		{ "{\"op\":\"backfill\",\"run_ids\":[1]}", "\"dag\" must be" },
		{ "{\"op\":\"kill\",\"op\":\"kill\",\"instance_id\":1}",
		  "not JSON" },
	};
	return cr_make_param_array(struct bad_case, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct bad_case *c, control, malformed)
{
	ax_control_msg m;
	ax_err         rv = ax_control_decode(c->json, &m);

	cr_assert_eq(rv, AX_EPARSE, "'%s' must be refused", c->json);
	cr_assert(strstr(ax_err_detail(), c->detail) != NULL,
	          "'%s': detail '%s' should contain '%s'", c->json,
	          ax_err_detail(), c->detail);
	cr_assert_null(m.cmd, "nothing allocated on failure");
}

Test(control, null_payload_is_refused)
{
	ax_control_msg m;
	cr_assert_eq(ax_control_decode(NULL, &m), AX_EPARSE);
}

/* A control_command row: kind -> op, its id in the ControlOp, the body's
 * members as the payload's. */
Test(control, command_rows_decode_with_their_id)
{
	static const struct {
		const char *kind, *body, *op, *dest;
	} rows[] = {
		{ "trigger", "{\"dag\":\"d\",\"logical_date_us\":5}",
		  "trigger", "time_detector" },
		{ "pause", "{\"dag\":\"d\"}", "paused", "dag_loader" },
		{ "unpause", "{\"dag\":\"d\"}", "unpaused", "dag_loader" },
		{ "clear", "{\"instance_id\":3,\"downstream\":true}", "clear",
		  "dependency_detector" },
		{ "mark", "{\"instance_id\":3,\"state\":\"FAILED\"}", "mark",
		  "dependency_detector" },
		{ "backfill",
		  "{\"dag\":\"d\",\"mode\":\"serial\",\"run_ids\":[4]}",
		  "backfill", "dependency_detector" },
		{ "submit",
		  "{\"file\":\"f\",\"dags\":[{\"name\":\"a\",\"outcome\":"
		  "\"created\"},{\"name\":\"b\"}],\"templates\":[]}",
		  "submit", "dag_loader" },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ax_control_msg m;
		ax_err         rv = ax_control_decode_command(
		            70 + (int64_t) i, rows[i].kind, rows[i].body, &m);
		cr_assert_eq(rv, AX_OK, "%s: %s", rows[i].kind,
		             ax_err_detail());
		cr_expect_eq(m.command_id, 70 + (int64_t) i);
		cr_expect_str_eq(m.dest[0], rows[i].dest, "%s", rows[i].kind);
		Ax__Command *c = ax__command__unpack(NULL, m.len, m.cmd);
		cr_assert_not_null(c);
		cr_assert_eq(c->body_case, AX__COMMAND__BODY_CONTROL);
		cr_expect_str_eq(c->control->op, rows[i].op);
		cr_expect_eq(c->control->command_id, 70 + (int64_t) i);
		if (!strcmp(rows[i].kind, "submit")) {
			cr_assert_eq(c->control->n_dags, 2);
			cr_expect_str_eq(c->control->dags[0], "a");
			cr_expect_str_eq(c->control->dags[1], "b");
		}
		ax__command__free_unpacked(c, NULL);
		ax_control_msg_fini(&m);
	}
	/* a kill keeps its instance for the thread's own bookkeeping */
	ax_control_msg m;
	cr_assert_eq(
	    ax_control_decode_command(9, "kill", "{\"instance_id\":12}", &m),
	    AX_OK);
	cr_expect_eq(m.instance_id, 12);
	cr_expect_eq(m.command_id, 9);
	ax_control_msg_fini(&m);
}

/* A row that can never be applied is rejected with this detail. */
Test(control, bad_command_rows_say_why)
{
	static const struct {
		const char *kind, *body, *says;
	} bad[] = {
		{ "explode", "{}", "unknown command kind" },
		{ "trigger", "[1]", "JSON object" },
		{ "trigger", "{", "not JSON" },
		{ "trigger", "{}", "\"dag\"" },
		{ "clear", "{\"instance_id\":0}", "instance_id" },
		{ "submit", "{\"dags\":[7]}", "dags" },
		{ "backfill", "{\"dag\":\"d\",\"run_ids\":[]}", "run_ids" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ax_control_msg m;
		cr_expect_eq(
		    ax_control_decode_command(1, bad[i].kind, bad[i].body, &m),
		    AX_EPARSE, "%s %s", bad[i].kind, bad[i].body);
		cr_expect_not_null(strstr(ax_err_detail(), bad[i].says),
		                   "%s %s: %s", bad[i].kind, bad[i].body,
		                   ax_err_detail());
		cr_expect_null(m.cmd);
	}
	/* a bare payload with a bad command_id */
	ax_control_msg m;
	cr_expect_eq(
	    ax_control_decode("{\"op\":\"resync\",\"command_id\":-1}", &m),
	    AX_EPARSE);
	cr_expect_not_null(strstr(ax_err_detail(), "command_id"));
}
