/*
 * test_store_commands.c - the control_command table (migration 0007,
 * engine/store_commands.c) against a real PostgreSQL: a command is
 * recorded pending, finished once (a second finish claims nothing), a
 * rejection needs a reason, the pending list is in id order, the
 * Idempotency-Key is unique per token, and a finish by a fenced store
 * records the lease epoch and is refused once the lease moved on.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "store_commands.h"
#include "store_fixture.h"
#include "store_sched.h"

AX_TEST_STORE_SUITE(store_commands);

static int64_t
q64(const char *sql)
{
	return ax_test_q_int(st, "%s", sql);
}

static int64_t
insert(const char *kind, const char *body, const char *key)
{
	ax_store_cmd_new c  = { .kind      = kind,
		                .body_json = body,
		                .idem_key  = key,
		                .actor     = "test" };
	int64_t          id = 0;
	cr_assert_eq(ax_store_commands_insert(st, &c, &id), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_gt(id, 0);
	return id;
}

Test(store_commands, recorded_pending_then_finished_once)
{
	int64_t           a = insert("trigger", "{\"dag\":\"x\"}", NULL);
	int64_t           b = insert("kill", "{\"instance_id\":7}", NULL);
	PGresult         *res;
	ax_store_cmd_done d[2] = {
		{ .id          = a,
		  .status      = AX_CMD_APPLIED,
		  .result_json = "{\"run_id\":5}" },
		{ .id     = b,
		  .status = AX_CMD_REJECTED,
		  .reason = "no task instance 7" },
	};
	size_t n = 9;

	cr_assert_eq(ax_store_commands_pending(st, 0, 10, &res), AX_OK);
	cr_assert_eq(PQntuples(res), 2);
	cr_expect_eq(ax_store_cell_i64(res, 0, AX_CMD_P_ID), a, "id order");
	cr_expect_str_eq(ax_store_cell(res, 0, AX_CMD_P_KIND), "trigger");
	cr_expect_str_eq(ax_store_cell(res, 1, AX_CMD_P_BODY),
	                 "{\"instance_id\": 7}");
	PQclear(res);
	cr_assert_eq(ax_store_commands_pending(st, a, 10, &res), AX_OK);
	cr_expect_eq(PQntuples(res), 1, "after_id skips the first");
	PQclear(res);

	cr_assert_eq(ax_store_commands_finish(st, d, 2, &n), AX_OK, "%s",
	             ax_err_detail());
	cr_expect_eq(n, 2);
	cr_expect(d[0].claimed && d[1].claimed);
	/* applied twice: the second claims nothing and changes nothing */
	d[0].result_json = "{\"run_id\":6}";
	cr_assert_eq(ax_store_commands_finish(st, d, 1, &n), AX_OK);
	cr_expect_eq(n, 0);
	cr_expect_eq(d[0].claimed, 0);
	cr_expect_eq(q64("SELECT (result->>'run_id')::int FROM "
	                 "control_command WHERE status = 'applied'"),
	             5);
	cr_expect_eq(q64("SELECT count(*) FROM control_command WHERE status "
	                 "= 'rejected' AND reason = 'no task instance 7' AND "
	                 "applied_at IS NOT NULL AND applied_epoch IS NULL"),
	             1);
	cr_assert_eq(ax_store_commands_pending(st, 0, 10, &res), AX_OK);
	cr_expect_eq(PQntuples(res), 0, "nothing pending");
	PQclear(res);

	cr_assert_eq(ax_store_commands_get(st, a, &res), AX_OK);
	cr_assert_eq(PQntuples(res), 1);
	cr_expect_str_eq(PQgetvalue(res, 0, PQfnumber(res, "status")),
	                 "applied");
	PQclear(res);
	cr_assert_eq(ax_store_commands_get(st, 999, &res), AX_OK);
	cr_expect_eq(PQntuples(res), 0, "unknown id: no row");
	PQclear(res);
}

Test(store_commands, bad_input_is_refused)
{
	ax_store_cmd_new  c  = { .kind = "explode" };
	ax_store_cmd_done d  = { .id = 1, .status = AX_CMD_REJECTED };
	ax_store_cmd_done p  = { .id = 1, .status = AX_CMD_PENDING };
	int64_t           id = 0;

	cr_expect_eq(ax_store_commands_insert(st, &c, &id), AX_EINVAL);
	cr_expect_not_null(strstr(ax_err_detail(), "explode"));
	c.kind      = "trigger";
	c.body_json = "[1]";
	cr_expect_eq(ax_store_commands_insert(st, &c, &id), AX_EINVAL);
	cr_expect_eq(ax_store_commands_finish(st, &d, 1, NULL), AX_EINVAL);
	cr_expect_not_null(strstr(ax_err_detail(), "reason"));
	cr_expect_eq(ax_store_commands_finish(st, &p, 1, NULL), AX_EINVAL);
	cr_expect_eq(q64("SELECT count(*) FROM control_command"), 0);
}

Test(store_commands, idempotency_key_unique_per_token)
{
	PGresult *res;
	int64_t   tok, id = 0;

	tok = q64("INSERT INTO api_tokens (name, role, hash) VALUES ('t', "
	          "'operator', repeat('a', 64)) RETURNING id");
	ax_store_cmd_new c = { .kind     = "trigger",
		               .idem_key = "k1",
		               .token_id = tok,
		               .request_sha256 =
		                   "0123456789abcdef0123456789abcdef"
		                   "0123456789abcdef0123456789abcdef" };
	cr_assert_eq(ax_store_commands_insert(st, &c, &id), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(
	    ax_store_commands_set_response(st, id, 202, "{\"command_id\":1}"),
	    AX_OK);
	cr_expect_eq(ax_store_commands_insert(st, &c, &id), AX_EEXIST);
	cr_expect_not_null(strstr(ax_err_detail(), "Idempotency-Key"));
	c.token_id = 0; /* another token (none): its own key space */
	cr_expect_eq(ax_store_commands_insert(st, &c, &id), AX_OK);

	cr_assert_eq(ax_store_commands_find_key(st, tok, "k1", &res), AX_OK);
	cr_assert_eq(PQntuples(res), 1);
	cr_expect_eq(ax_store_cell_i64(res, 0, AX_CMD_K_RESP_STATUS), 202);
	cr_expect_str_eq(ax_store_cell(res, 0, AX_CMD_K_RESPONSE),
	                 "{\"command_id\": 1}");
	cr_expect_eq(strlen(ax_store_cell(res, 0, AX_CMD_K_SHA)), 64);
	PQclear(res);
	cr_assert_eq(ax_store_commands_find_key(st, tok, "k2", &res), AX_OK);
	cr_expect_eq(PQntuples(res), 0);
	PQclear(res);
}

Test(store_commands, finish_is_fenced_and_records_the_epoch)
{
	ax_store *fs    = NULL;
	int64_t   epoch = 0, epoch2 = 0;
	int64_t   a = insert("trigger", NULL, NULL);
	int64_t   b = insert("trigger", NULL, NULL);

	cr_assert_eq(ax_store_sched_lease_take(st, "axd 1", 60000000, &epoch),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &fs), AX_OK);
	cr_assert_eq(ax_store_set_fence(fs, epoch), AX_OK);
	ax_store_cmd_done d = { .id = a, .status = AX_CMD_APPLIED };
	cr_assert_eq(ax_store_commands_finish(fs, &d, 1, NULL), AX_OK, "%s",
	             ax_err_detail());
	cr_expect(d.claimed);
	char sql[128];
	snprintf(sql, sizeof(sql),
	         "SELECT applied_epoch FROM control_command WHERE id = %lld",
	         (long long) a);
	cr_expect_eq(q64(sql), epoch);

	/* another axd takes over: the deposed one writes nothing */
	cr_assert_eq(ax_store_sched_lease_release(st, "axd 1", epoch), AX_OK);
	cr_assert_eq(ax_store_sched_lease_take(st, "axd 2", 60000000, &epoch2),
	             AX_OK, "%s", ax_err_detail());
	d.id = b;
	cr_expect_eq(ax_store_commands_finish(fs, &d, 1, NULL), AX_EFENCED);
	cr_expect_eq(q64("SELECT count(*) FROM control_command WHERE status "
	                 "= 'pending'"),
	             1, "the fenced finish left it pending");
	ax_store_close(fs);
}

/* Settling a command writes one event naming the caller; a second
 * finish (a redelivery) writes none. */
Test(store_commands, settling_writes_an_audit_event_naming_the_caller)
{
	int64_t dag = q64("INSERT INTO dags (name) VALUES ('audited') "
	                  "RETURNING id");
	int64_t tok = q64("INSERT INTO api_tokens (name, role, hash) VALUES "
	                  "('alice', 'operator', repeat('b', 64)) RETURNING "
	                  "id");
	ax_store_cmd_new c  = { .kind       = "pause",
		                .body_json  = "{\"dag\":\"audited\"}",
		                .token_id   = tok,
		                .token_name = "alice",
		                .token_role = "operator",
		                .actor      = "ax-api" };
	int64_t          id = 0, id2 = 0;
	char             sql[512];

	cr_assert_eq(ax_store_commands_insert(st, &c, &id), AX_OK, "%s",
	             ax_err_detail());
	c.kind      = "kill";
	c.body_json = "{\"instance_id\":\"1; DROP TABLE dags\"}";
	cr_assert_eq(ax_store_commands_insert(st, &c, &id2), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(q64("SELECT count(*) FROM event_log"), 0,
	             "an event before the command was settled");
	ax_store_cmd_done d[2] = {
		{ .id = id, .status = AX_CMD_APPLIED, .result_json = "{}" },
		{ .id = id2, .status = AX_CMD_REJECTED, .reason = "bad id" },
	};
	cr_assert_eq(ax_store_commands_finish(st, d, 2, NULL), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_store_commands_finish(st, d, 2, NULL), AX_OK);
	cr_assert_eq(q64("SELECT count(*) FROM event_log"), 2,
	             "one event per settled command, none on a redelivery");
	snprintf(sql, sizeof(sql),
	         "SELECT count(*) FROM event_log WHERE type = "
	         "'command.applied' AND reason = 'PAUSE' AND dag_id = %lld "
	         "AND payload->>'token_name' = 'alice' AND "
	         "payload->>'token_role' = 'operator' AND "
	         "(payload->>'token_id')::bigint = %lld AND "
	         "(payload->>'command_id')::bigint = %lld AND "
	         "payload->>'kind' = 'pause' AND "
	         "payload->'body'->>'dag' = 'audited' AND "
	         "payload->>'requested_at' LIKE '____-__-__T%%Z'",
	         (long long) dag, (long long) tok, (long long) id);
	cr_assert_eq(q64(sql), 1, "the pause event does not name alice");
	snprintf(sql, sizeof(sql),
	         "SELECT count(*) FROM event_log WHERE type = "
	         "'command.rejected' AND instance_id IS NULL AND "
	         "payload->>'reason' = 'bad id' AND "
	         "payload->>'token_name' = 'alice' AND "
	         "(payload->>'command_id')::bigint = %lld",
	         (long long) id2);
	cr_assert_eq(q64(sql), 1, "the rejection is not in the event log");
	PGresult *res = NULL;
	cr_assert_eq(ax_store_commands_get(st, id, &res), AX_OK);
	cr_assert_str_eq(PQgetvalue(res, 0, PQfnumber(res, "token_name")),
	                 "alice");
	cr_assert_str_eq(PQgetvalue(res, 0, PQfnumber(res, "token_role")),
	                 "operator");
	PQclear(res);
	cr_assert_eq(q64("SELECT count(*) FROM dags"), 1);
}
