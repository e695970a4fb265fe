/*
 * test_store.c - the store's connection and transactions against a real
 * PostgreSQL: retry on serialization failure, SQLSTATE translation,
 * append-only and immutable tables, prepared statements and their plans,
 * a password masked in connection errors, reconnection after the server
 * restarts (idle, and in the middle of a transaction), lease-epoch
 * fencing (a second lease taker bumps the epoch, and the first store's
 * next transaction fails with AX_EFENCED and writes nothing; a takeover
 * waits for the deposed holder's transaction in flight, and gives up when
 * it lasts; the fence travels in the DSN; autocommit writes of the store
 * helpers are fenced), the pipelined opening of a transaction, deferred
 * writes, generic plans and warming. The instance tables' writes are
 * test_store_instances.c, event rows test_store_events.c (fixture:
 * store_suite.h).
 */
#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "pg_harness.h"
#include "state.h"
#include "store_fixture.h"
#include "store.h"
#include "store_attempts.h"
#include "store_sched.h"
#include "store_suite.h"

TestSuite(store, .init = ax_store_suite_setup, .fini = ax_store_suite_teardown,
          .timeout = 120);

struct ser_arg {
	ax_store *other;
	int       calls;
};

/* Reads a counter, lets another session change it on the first call,
 * then writes it: SERIALIZABLE must fail the first try with 40001. */
static ax_err
ser_body(ax_store *s, void *argp)
{
	struct ser_arg *a = argp;
	int64_t         v;
	ax_err          rv;

	a->calls++;
	if ((rv = ax_store_query_int64(s, "SELECT v FROM t_counter", 0, NULL,
	                               &v)) != AX_OK)
		return rv;
	if (a->calls == 1 &&
	    (rv = ax_store_exec(a->other, "UPDATE t_counter SET v = v + 1", 0,
	                        NULL)) != AX_OK)
		return rv;
	return ax_store_exec(s, "UPDATE t_counter SET v = v + 1", 0, NULL);
}

Test(store, serialization_failure_is_retried)
{
	struct ser_arg a = { 0 };
	cr_assert_eq(
	    ax_store_exec(st, "CREATE TABLE t_counter (v int)", 0, NULL),
	    AX_OK, "%s", ax_err_detail());
	cr_assert_eq(
	    ax_store_exec(st, "INSERT INTO t_counter VALUES (0)", 0, NULL),
	    AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &a.other), AX_OK);
	cr_assert_eq(ax_store_tx_serializable(st, ser_body, &a), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(a.calls, 2);
	cr_assert_eq(ax_store_retries(st), 1);
	cr_assert_eq(q64("SELECT v FROM t_counter"), 2);
	ax_store_close(a.other);
}

Test(store, sqlstates_translate)
{
	cr_assert_eq(ax_store_exec(st, "INSERT INTO dags (name) VALUES ('d1')",
	                           0, NULL),
	             AX_EEXIST);
	cr_assert(strstr(ax_err_detail(), "23505") != NULL);
	cr_assert_eq(ax_store_exec(st, "SELECT * FROM no_such_table", 0, NULL),
	             AX_EDB);
	cr_assert(strstr(ax_err_detail(), "no_such_table") != NULL);
	cr_assert_eq(ax_store_sqlstate_err("40001"), AX_ERETRY);
	cr_assert_eq(ax_store_sqlstate_err("40P01"), AX_ERETRY);
	cr_assert_eq(ax_store_sqlstate_err("P0001"), AX_ESTATE);
	cr_assert_eq(ax_store_sqlstate_err("08006"), AX_EDBCONN);
	cr_assert_eq(ax_store_sqlstate_err("23503"), AX_ENOENT);
	cr_assert_eq(ax_store_sqlstate_err("22P02"), AX_EINVAL);
	cr_assert_eq(ax_store_sqlstate_err(NULL), AX_EDB);
	cr_assert_eq(ax_store_sqlstate_err("XX000"), AX_EDB);
}

Test(store, event_log_is_append_only_and_versions_immutable)
{
	cr_assert_eq(
	    ax_store_exec(st,
	                  "INSERT INTO event_log (event_id, type) VALUES "
	                  "(gen_random_uuid(), 'test')",
	                  0, NULL),
	    AX_OK, "%s", ax_err_detail());
	cr_assert_eq(
	    ax_store_exec(st, "UPDATE event_log SET type = 'x'", 0, NULL),
	    AX_EPERM);
	cr_assert(strstr(ax_err_detail(), "append-only") != NULL, "%s",
	          ax_err_detail());
	cr_assert_eq(ax_store_exec(st, "DELETE FROM event_log", 0, NULL),
	             AX_EPERM);
	cr_assert_eq(ax_store_exec(st, "TRUNCATE event_log", 0, NULL),
	             AX_EPERM);
	cr_assert_eq(
	    ax_store_exec(st, "UPDATE dag_versions SET yaml = 'x'", 0, NULL),
	    AX_EPERM);
	cr_assert(strstr(ax_err_detail(), "immutable") != NULL);
	cr_assert_eq(q64("SELECT count(*) FROM event_log"), 1);
}

Test(store, prepared_statements_and_errors)
{
	PGresult   *r;
	const char *p[1] = { "41" };
	cr_assert_eq(ax_store_prepare(st, "plus1", "SELECT $1::int + 1", 1),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_prepare(st, "plus1", "SELECT 1", 0), AX_EEXIST);
	cr_assert_eq(ax_store_prepare(st, "bad", "SELEC 1", 0), AX_EDB);
	cr_assert_eq(ax_store_query_prepared(st, "bad", 0, NULL, &r),
	             AX_ENOENT);
	cr_assert_null(r);
	cr_assert_eq(ax_store_query_prepared(st, "plus1", 1, p, &r), AX_OK);
	cr_assert_str_eq(PQgetvalue(r, 0, 0), "42");
	PQclear(r);
}

/* The cached plan of `name` on st's connection, as EXPLAIN prints it. */
static char *
cached_plan(const char *name, const char *arg)
{
	char      sql[128];
	PGresult *r;
	size_t    len = 0;
	char     *out = calloc(1, 4096);
	snprintf(sql, sizeof(sql), "EXPLAIN EXECUTE %s('%s')", name, arg);
	cr_assert_eq(ax_store_query(st, sql, 0, NULL, &r), AX_OK, "%s",
	             ax_err_detail());
	for (int i = 0; i < PQntuples(r) && len < 4000; i++)
		len += (size_t) snprintf(out + len, 4096 - len, "%s\n",
		                         PQgetvalue(r, i, 0));
	PQclear(r);
	return out;
}

/* A generic plan made while a table was empty must not stay once the
 * table has grown: the batch lookups would scan the whole table at every
 * call (quadratic in the table's growth). */
Test(store, cached_plans_follow_table_growth)
{
	const char *sql    = "SELECT a.id FROM unnest($1::uuid[]) AS u(rid) "
	                     "JOIN attempts a ON a.run_id = u.rid";
	const char *arg[1] = { "{00000000-0000-7000-8000-000000000001}" };
	PGresult   *r;
	cr_assert_eq(ax_store_prepare(st, "lookup", sql, 1), AX_OK, "%s",
	             ax_err_detail());
	for (int i = 0; i < 8; i++) { /* the generic plan: table empty */
		cr_assert_eq(ax_store_query_prepared(st, "lookup", 1, arg, &r),
		             AX_OK, "%s", ax_err_detail());
		PQclear(r);
	}
	char *plan = cached_plan("lookup", arg[0]);
	cr_assert(strstr(plan, "Seq Scan on attempts") != NULL,
	          "expected the empty-table plan to scan:\n%s", plan);
	free(plan);
	int64_t iid = one_instance();
	char    ins[256];
	snprintf(
	    ins, sizeof(ins),
	    "WITH i AS (INSERT INTO attempts (run_id, instance_id, number, "
	    "due_at) SELECT gen_random_uuid(), %lld, g, now() FROM "
	    "generate_series(1, 50000) g RETURNING 1) SELECT count(*) "
	    "FROM i",
	    (long long) iid);
	cr_assert_eq(q64(ins), 50000);
	for (int i = 0; i < 200; i++) {
		cr_assert_eq(ax_store_query_prepared(st, "lookup", 1, arg, &r),
		             AX_OK, "%s", ax_err_detail());
		PQclear(r);
	}
	plan = cached_plan("lookup", arg[0]);
	cr_assert(strstr(plan, "Seq Scan on attempts") == NULL,
	          "the plan still scans attempts after it grew to 50,000 "
	          "rows:\n%s",
	          plan);
	free(plan);
}

Test(store, connect_error_masks_password)
{
	ax_store *s = (ax_store *) 1;
	cr_assert_eq(
	    ax_store_open("postgresql://ax:hunter2@/ax?host=/nowhere", &s),
	    AX_EDBCONN);
	cr_assert_null(s);
	cr_assert(strstr(ax_err_detail(), "hunter2") == NULL, "%s",
	          ax_err_detail());
	cr_assert(strstr(ax_err_detail(), "/nowhere") != NULL, "%s",
	          ax_err_detail());
	char buf[128];
	ax_store_dsn_redact("host=h password='a b' user=u", buf, sizeof(buf));
	cr_assert_str_eq(buf, "user=u password=*** host=h");
}

static void
restart_server(void)
{
	ax_pg_embed *e = ax_test_pg_embed(pg);
	cr_assert_eq(ax_pg_embed_down(e), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_pg_embed_up(e), AX_OK, "%s", ax_err_detail());
}

Test(store, reconnects_after_server_restart)
{
	PGresult   *r;
	const char *p[1] = { "1" };
	cr_assert_eq(ax_store_prepare(st, "plus1", "SELECT $1::int + 1", 1),
	             AX_OK);
	restart_server();
	cr_assert_eq(ax_store_query_prepared(st, "plus1", 1, p, &r), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_str_eq(PQgetvalue(r, 0, 0), "2", "re-prepared");
	PQclear(r);
	cr_assert_eq(ax_store_reconnects(st), 1);
	cr_assert_eq(q64("SELECT count(*) FROM dags"), 1);
}

struct restart_arg {
	int calls;
};

static ax_err
restart_body(ax_store *s, void *argp)
{
	struct restart_arg *a = argp;
	ax_err              rv;
	if ((rv = ax_store_exec(s,
	                        "INSERT INTO pools (name, slots) VALUES "
	                        "('p1', 4)",
	                        0, NULL)) != AX_OK)
		return rv;
	if (++a->calls == 1)
		restart_server(); /* the open transaction dies with it */
	return ax_store_exec(s, "UPDATE pools SET slots = 5", 0, NULL);
}

Test(store, transaction_survives_server_restart)
{
	struct restart_arg a = { 0 };
	cr_assert_eq(ax_store_tx(st, restart_body, &a), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(a.calls, 2);
	cr_assert_eq(q64("SELECT slots FROM pools WHERE name = 'p1'"), 5);
	cr_assert_eq(q64("SELECT count(*) FROM pools"), 1);
}

/* ---------------------------------------------------------------------- */
/* fencing (store.h, "Fencing") */

#define TTL_US (60 * AX_USEC_PER_SEC)

/* What the fence hook saw (one process per test). */
static int     hook_calls;
static int64_t hook_fence, hook_epoch;

static void
hook(void *arg, int64_t fence, int64_t epoch)
{
	(void) arg;
	hook_calls++;
	hook_fence = fence;
	hook_epoch = epoch;
}

/* Takes the lease for holder (after expiring whoever holds it). */
static int64_t
take(const char *holder)
{
	int64_t epoch = 0;
	q64("UPDATE scheduler_lease SET expires_at = now() - interval "
	    "'1 second' RETURNING 1");
	cr_assert_eq(ax_store_sched_lease_take(st, holder, TTL_US, &epoch),
	             AX_OK, "%s", ax_err_detail());
	return epoch;
}

/* A store opened with the DSN fenced at epoch. */
static ax_store *
open_fenced(int64_t epoch)
{
	char     *dsn = NULL;
	ax_store *s   = NULL;
	cr_assert_eq(ax_store_dsn_fenced(ax_test_pg_dsn(pg), epoch, &dsn),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_open(dsn, &s), AX_OK, "%s", ax_err_detail());
	free(dsn);
	cr_assert_eq(ax_store_fence(s), epoch);
	return s;
}

/* Transaction body: inserts the DAG named arg. */
static ax_err
insert_dag(ax_store *s, void *arg)
{
	const char *p[1] = { arg };
	return ax_store_exec(s, "INSERT INTO dags (name) VALUES ($1)", 1, p);
}

static int64_t
dags_named(const char *name)
{
	char sql[160];
	snprintf(sql, sizeof(sql),
	         "SELECT count(*) FROM dags WHERE name = '%s'", name);
	return q64(sql);
}

Test(store, fence_takeover_fences_the_deposed_store_which_writes_nothing)
{
	int64_t   e1 = take("axd A");
	ax_store *a  = open_fenced(e1);
	char      want[128];

	ax_store_set_fence_hook(hook, NULL);
	cr_assert_eq(ax_store_tx(a, insert_dag, "before"), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(dags_named("before"), 1);

	int64_t e2 = take("axd B");
	cr_assert_eq(e2, e1 + 1);
	cr_assert_eq(ax_store_tx(a, insert_dag, "after"), AX_EFENCED);
	snprintf(want, sizeof(want),
	         "writes for scheduler lease epoch %lld, but the lease is at "
	         "epoch %lld (holder 'axd B')",
	         (long long) e1, (long long) e2);
	cr_assert(strstr(ax_err_detail(), want) != NULL, "%s",
	          ax_err_detail());
	cr_assert_eq(dags_named("after"), 0, "the fenced transaction wrote");
	cr_assert_eq(hook_calls, 1);
	cr_assert_eq(hook_fence, e1);
	cr_assert_eq(hook_epoch, e2);

	/* fenced for good, whatever the kind of transaction; the hook is
	 * told once */
	cr_assert_eq(ax_store_tx_relaxed(a, insert_dag, "after"), AX_EFENCED);
	cr_assert_eq(ax_store_tx_serializable(a, insert_dag, "after"),
	             AX_EFENCED);
	cr_assert_eq(ax_store_begin(a), AX_EFENCED);
	cr_assert(!ax_store_in_tx(a));
	cr_assert_eq(ax_store_write(a, NULL,
	                            "INSERT INTO dags (name) VALUES ('after')",
	                            0, NULL, NULL),
	             AX_EFENCED);
	cr_assert_eq(dags_named("after"), 0);
	cr_assert_eq(hook_calls, 1);
	cr_assert_eq(ax_store_retries(a), 0, "a fence is not retried");

	/* reads still work (a deposed axd may look, not write) */
	int64_t one = 0;
	cr_assert_eq(ax_store_query_int64(a, "SELECT 1", 0, NULL, &one),
	             AX_OK);
	/* the new holder's store writes */
	ax_store *b = open_fenced(e2);
	cr_assert_eq(ax_store_tx(b, insert_dag, "by B"), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(dags_named("by B"), 1);
	ax_store_close(b);
	ax_store_close(a);
}

Test(store, fence_a_store_without_fence_is_not_checked)
{
	int64_t   e1 = take("axd A");
	ax_store *a  = open_fenced(e1);

	cr_assert_eq(ax_store_set_fence(a, -1), AX_EINVAL);
	take("axd B");
	cr_assert_eq(ax_store_tx(a, insert_dag, "x"), AX_EFENCED);
	cr_assert_eq(ax_store_set_fence(a, 0), AX_OK);
	cr_assert_eq(ax_store_fence(a), 0);
	cr_assert_eq(ax_store_tx(a, insert_dag, "x"), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_store_tx(st, insert_dag, "y"), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(dags_named("x") + dags_named("y"), 2);
	ax_store_close(a);
}

Test(store, fence_autocommit_writes_of_the_helpers_are_fenced)
{
	int64_t   e1 = take("axd A");
	ax_store *a  = open_fenced(e1);
	int64_t   sid =
	    q64("WITH d AS (INSERT INTO dags (name) VALUES ('d') RETURNING "
	        "id) INSERT INTO schedules (dag_id, expression) SELECT id, "
	        "'0 0 0 * * *' FROM d RETURNING id");
	int64_t next = 1774749600000000LL;

	cr_assert_eq(ax_store_sched_set_next(a, &sid, &next, 1), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(q64("SELECT ax_us(next_fire_at) FROM schedules"), next);
	take("axd B");
	next += AX_USEC_PER_SEC;
	cr_assert_eq(ax_store_sched_set_next(a, &sid, &next, 1), AX_EFENCED);
	cr_assert_eq(q64("SELECT ax_us(next_fire_at) FROM schedules"),
	             next - AX_USEC_PER_SEC,
	             "a deposed time detector moved a schedule");
	ax_store_close(a);
}

/* The second taker, on its own thread. */
typedef struct taker {
	ax_store   *s;
	int64_t     ttl_us;
	int64_t     epoch;
	ax_err      rv;
	char        detail[512];
	atomic_int  done;
	const char *holder;
} taker;

static void *
take_thread(void *arg)
{
	taker *t = arg;
	t->rv =
	    ax_store_sched_lease_take(t->s, t->holder, t->ttl_us, &t->epoch);
	snprintf(t->detail, sizeof(t->detail), "%s", ax_err_detail());
	atomic_store(&t->done, 1);
	return NULL;
}

/*
 * A store fenced for "axd A" (epoch *e1) with a transaction open, its
 * fence check passed; then "axd B" takes the lease over (ttl_us) on its
 * own thread.
 */
static ax_store *
takeover_in_flight(taker *t, pthread_t *th, int64_t ttl_us, int64_t *e1)
{
	ax_store *a;

	*e1 = take("axd A");
	a   = open_fenced(*e1);
	cr_assert_eq(ax_store_begin(a), AX_OK, "%s", ax_err_detail());
	/* BEGIN and the fence check travel with the first statement */
	cr_assert_eq(ax_store_exec(a, "SELECT 1", 0, NULL), AX_OK, "%s",
	             ax_err_detail());
	memset(t, 0, sizeof(*t));
	t->holder = "axd B";
	t->ttl_us = ttl_us;
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &t->s), AX_OK);
	q64("UPDATE scheduler_lease SET expires_at = now() - interval "
	    "'1 second' RETURNING 1");
	cr_assert_eq(pthread_create(th, NULL, take_thread, t), 0);
	return a;
}

Test(store, fence_takeover_waits_for_the_transaction_in_flight)
{
	taker     t;
	pthread_t th;
	int64_t   e1;
	ax_store *a = takeover_in_flight(&t, &th, TTL_US, &e1);

	cr_assert_eq(insert_dag(a, "in flight"), AX_OK, "%s", ax_err_detail());
	ax_clock_sleep_us(400 * AX_USEC_PER_MSEC);
	cr_assert(!atomic_load(&t.done),
	          "the takeover did not wait for the deposed holder's "
	          "transaction (%s)",
	          t.detail);
	cr_assert_eq(q64("SELECT epoch FROM scheduler_lease"), e1);
	cr_assert_eq(ax_store_commit(a), AX_OK, "%s", ax_err_detail());
	pthread_join(th, NULL);
	cr_assert_eq(t.rv, AX_OK, "%s", t.detail);
	cr_assert_eq(t.epoch, e1 + 1);
	/* committed under the epoch it was checked against */
	cr_assert_eq(dags_named("in flight"), 1);
	cr_assert_eq(ax_store_tx(a, insert_dag, "late"), AX_EFENCED);
	cr_assert_eq(dags_named("late"), 0);
	ax_store_close(t.s);
	ax_store_close(a);
}

Test(store, fence_takeover_gives_up_while_a_transaction_holds_on)
{
	taker     t;
	pthread_t th;
	int64_t   e1, t0 = ax_clock_mono_us();
	/* lease_ttl 600 ms: the takeover waits a third of it */
	ax_store *a = takeover_in_flight(&t, &th, 600 * AX_USEC_PER_MSEC, &e1);

	pthread_join(th, NULL);
	int64_t waited = ax_clock_mono_us() - t0;
	cr_assert_eq(t.rv, AX_EBUSY, "%d %s", t.rv, t.detail);
	cr_assert(strstr(t.detail, "transactions of its previous holder") !=
	              NULL,
	          "%s", t.detail);
	cr_assert_lt(waited, 5 * AX_USEC_PER_SEC);
	cr_assert_eq(q64("SELECT epoch FROM scheduler_lease"), e1,
	             "the epoch moved while a fenced transaction was open");
	cr_assert_eq(ax_store_rollback(a), AX_OK);
	/* once it is over the takeover goes through */
	cr_assert_eq(ax_store_sched_lease_take(t.s, "axd B", TTL_US, &t.epoch),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_eq(t.epoch, e1 + 1);
	ax_store_close(t.s);
	ax_store_close(a);
}

Test(store, fence_a_valid_lease_is_not_taken_and_locks_nothing)
{
	int64_t   e1    = take("axd A");
	ax_store *a     = open_fenced(e1);
	int64_t   epoch = 0;

	q64("UPDATE scheduler_lease SET expires_at = now() + interval "
	    "'1 minute' RETURNING 1");
	cr_assert_eq(ax_store_begin(a), AX_OK, "%s", ax_err_detail());
	int64_t t0 = ax_clock_mono_us();
	cr_assert_eq(ax_store_sched_lease_take(st, "axd B", TTL_US, &epoch),
	             AX_EBUSY);
	cr_assert(strstr(ax_err_detail(), "is held by 'axd A' until") != NULL,
	          "%s", ax_err_detail());
	cr_assert_lt(ax_clock_mono_us() - t0, 2 * AX_USEC_PER_SEC,
	             "a standby's poll waited for the holder's transaction");
	cr_assert_eq(ax_store_commit(a), AX_OK);
	ax_store_close(a);
}

Test(store, fence_the_fence_travels_in_the_dsn_to_the_server)
{
	char     *dsn = NULL, *dsn2 = NULL;
	ax_store *s = NULL;
	PGresult *r = NULL;

	cr_assert_eq(ax_store_dsn_fenced(ax_test_pg_dsn(pg), 7, &dsn), AX_OK);
	cr_assert_eq(ax_store_dsn_fenced(dsn, 9, &dsn2), AX_OK);
	cr_assert_eq(ax_store_open(dsn2, &s), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_fence(s), 9, "the later fence wins");
	cr_assert_eq(ax_store_query(s, "SHOW ax.fence_epoch", 0, NULL, &r),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_str_eq(PQgetvalue(r, 0, 0), "9");
	PQclear(r);
	/* the lease is at epoch 0: the store is fenced out at once */
	cr_assert_eq(ax_store_tx(s, insert_dag, "z"), AX_EFENCED);
	cr_assert_eq(dags_named("z"), 0);
	ax_store_close(s);
	free(dsn);
	free(dsn2);
}

/* Transaction body: the dags rows named arg, or -1. */
static int64_t
tx_dags_count(ax_store *s, const char *name)
{
	const char *p[1] = { name };
	PGresult   *r    = NULL;
	int64_t     n    = -1;
	if (ax_store_query(s, "SELECT count(*) FROM dags WHERE name = $1", 1,
	                   p, &r) == AX_OK)
		n = ax_store_cell_i64(r, 0, 0);
	PQclear(r);
	return n;
}

/*
 * BEGIN (with the relaxed durability and the fence check) travels with a
 * transaction's first statement, in one pipeline. Whatever that statement
 * does, the transaction behaves as if BEGIN had gone first on its own.
 */
Test(store, first_statement_carries_the_begin)
{
	int64_t   e1 = take("axd A");
	ax_store *a  = open_fenced(e1);
	PGresult *r  = NULL;

	/* its statements are one transaction: the insert is seen inside,
	 * not outside, until COMMIT */
	cr_assert_eq(ax_store_begin(a), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(insert_dag(a, "piped"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(tx_dags_count(a, "piped"), 1);
	cr_assert_eq(dags_named("piped"), 0);
	cr_assert_eq(ax_store_commit(a), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(dags_named("piped"), 1);
	/* a rolled-back first statement leaves nothing */
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(insert_dag(a, "undone"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_rollback(a), AX_OK);
	cr_assert_eq(dags_named("undone"), 0);
	/* a first statement that fails: its SQLSTATE, the transaction
	 * aborted, and the connection usable for the next one */
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(insert_dag(a, "piped"), AX_EEXIST, "%s", ax_err_detail());
	cr_assert_str_eq(ax_store_error_sqlstate(a), "23505");
	cr_assert_neq(insert_dag(a, "after error"), AX_OK);
	cr_assert_eq(ax_store_rollback(a), AX_OK);
	cr_assert_eq(ax_store_tx_relaxed(a, insert_dag, "after error"), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_eq(dags_named("after error"), 1);
	/* a transaction with no statement commits and sends nothing */
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert(ax_store_in_tx(a));
	cr_assert_eq(ax_store_commit(a), AX_OK, "%s", ax_err_detail());
	cr_assert(!ax_store_in_tx(a));
	/* a COPY first sends the BEGIN on its own */
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(ax_store_copy_in(a, "COPY dags (name) FROM STDIN",
	                              "copied\n", 7, NULL),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_rollback(a), AX_OK);
	cr_assert_eq(dags_named("copied"), 0);
	/* the connection is out of pipeline mode between transactions */
	cr_assert_eq(ax_store_query(a, "SELECT 41 + 1", 0, NULL, &r), AX_OK);
	cr_assert_str_eq(PQgetvalue(r, 0, 0), "42");
	PQclear(r);
	cr_assert_eq(PQpipelineStatus(ax_store_conn(a)), PQ_PIPELINE_OFF);
	ax_store_close(a);
}

/* A deferred insert into dags of the DAG named name. */
static ax_err
defer_dag(ax_store *s, const char *name)
{
	const char *p[1] = { name };
	return ax_store_write_deferred(s, "t.ins_dag", 1, p);
}

/*
 * Writes sent without waiting answer with the transaction's next
 * statement or its COMMIT, in one pipeline; the transaction behaves as if
 * each had waited for its answer: all of it commits, or none of it.
 */
Test(store, deferred_writes_answer_with_the_next_statement_or_the_commit)
{
	int64_t   e1 = take("axd A");
	ax_store *a  = open_fenced(e1);
	char      name[32];

	cr_assert_eq(ax_store_prepare(a, "t.ins_dag",
	                              "INSERT INTO dags (name) VALUES ($1)",
	                              1),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_write_deferred(a, "t.nope", 0, NULL), AX_ENOENT);
	/* outside a transaction: written at once */
	cr_assert_eq(defer_dag(a, "alone"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(dags_named("alone"), 1);
	/* 40 deferred from the first on (the opening and the fence check go
	 * before the first), more than one pipeline holds: all land with
	 * the COMMIT, none before it */
	cr_assert_eq(ax_store_begin(a), AX_OK);
	for (int i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "d-%d", i);
		cr_assert_eq(defer_dag(a, name), AX_OK, "%s", ax_err_detail());
	}
	cr_assert_eq(dags_named("d-0"), 0);
	cr_assert_eq(ax_store_commit(a), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(q64("SELECT count(*) FROM dags WHERE name LIKE 'd-%'"),
	             40);
	/* a statement after deferred writes sees them */
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(insert_dag(a, "r-0"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(defer_dag(a, "r-1"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(tx_dags_count(a, "r-1"), 1);
	cr_assert_eq(ax_store_commit(a), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(dags_named("r-1"), 1);
	/* a deferred write that fails is the COMMIT's error, named; nothing
	 * of the transaction is kept, before or after it */
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(insert_dag(a, "x-0"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(defer_dag(a, "x-1"), AX_OK);
	cr_assert_eq(defer_dag(a, "d-3"), AX_OK); /* taken */
	cr_assert_eq(defer_dag(a, "x-2"), AX_OK);
	cr_assert_eq(ax_store_commit(a), AX_EEXIST, "%s", ax_err_detail());
	cr_assert(strstr(ax_err_detail(), "t.ins_dag") != NULL, "%s",
	          ax_err_detail());
	cr_assert_str_eq(ax_store_error_sqlstate(a), "23505");
	cr_assert(!ax_store_in_tx(a));
	cr_assert_eq(q64("SELECT count(*) FROM dags WHERE name LIKE 'x-%'"),
	             0);
	/* ... or the next statement's, when one follows */
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(insert_dag(a, "y-0"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(defer_dag(a, "d-3"), AX_OK);
	cr_assert_eq(tx_dags_count(a, "y-0"), -1);
	cr_assert_str_eq(ax_store_error_sqlstate(a), "23505");
	cr_assert_eq(ax_store_rollback(a), AX_OK);
	cr_assert_eq(dags_named("y-0"), 0);
	/* a rollback drops them */
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(insert_dag(a, "z-0"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(defer_dag(a, "z-1"), AX_OK);
	cr_assert_eq(ax_store_rollback(a), AX_OK);
	cr_assert_eq(dags_named("z-1"), 0);
	cr_assert_eq(PQpipelineStatus(ax_store_conn(a)), PQ_PIPELINE_OFF);
	/* the store goes on: a transaction retried as a whole commits */
	cr_assert_eq(ax_store_tx(a, insert_dag, "z-2"), AX_OK, "%s",
	             ax_err_detail());
	/* a transaction of deferred writes only, and one that reads after
	 * them, on a store that is still the lease's */
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(defer_dag(a, "v-0"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_commit(a), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(dags_named("v-0"), 1);
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(defer_dag(a, "v-1"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(tx_dags_count(a, "v-1"), 1);
	cr_assert_eq(ax_store_commit(a), AX_OK, "%s", ax_err_detail());
	/* deposed: a deferred write as the first statement is sent after
	 * the fence check, which is judged before the COMMIT is sent (the
	 * COMMIT's error) or with the next statement (its error) */
	take("axd B");
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(defer_dag(a, "w-0"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_commit(a), AX_EFENCED, "%s", ax_err_detail());
	cr_assert(!ax_store_in_tx(a));
	cr_assert_eq(dags_named("w-0"), 0);
	ax_store_close(a);
	a = open_fenced(e1);
	cr_assert_eq(ax_store_prepare(a, "t.ins_dag",
	                              "INSERT INTO dags (name) VALUES ($1)",
	                              1),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(defer_dag(a, "w-1"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(tx_dags_count(a, "w-1"), -1);
	cr_assert(strstr(ax_err_detail(), "fenced") != NULL, "%s",
	          ax_err_detail());
	cr_assert(!ax_store_in_tx(a));
	cr_assert_eq(ax_store_commit(a), AX_EINVAL);
	cr_assert_eq(dags_named("w-1"), 0);
	ax_store_close(a);
}

/* plan_cache_mode as the store's session sees it now. */
static void
assert_plan_mode_auto(ax_store *s)
{
	PGresult *r = NULL;
	cr_assert_eq(ax_store_query(s, "SHOW plan_cache_mode", 0, NULL, &r),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_str_eq(PQgetvalue(r, 0, 0), "auto");
	PQclear(r);
}

/* How often the session planned statement name generic and custom. */
static void
plans_of(ax_store *s, const char *name, int64_t *generic, int64_t *custom)
{
	cr_assert(ax_test_plans(s, name, generic, custom),
	          "%s is not prepared", name);
}

#define SQL_T_JOIN                                                            \
	"SELECT d.id FROM dags d JOIN dag_versions v ON v.dag_id = d.id "     \
	"WHERE d.name = ANY($1::text[])"

/*
 * A statement registered with ax_store_prepare_generic runs its generic
 * plan wherever it is sent: as a transaction's first statement (with the
 * BEGIN and the fence), as a later one, deferred, and on its own; the
 * setting never outlives the statement, also when the statement fails.
 * The same SQL registered plainly is planned for its values (custom) by
 * PostgreSQL, which is what the generic registration avoids.
 */
Test(store, generic_statements_run_their_generic_plan_and_leave_the_setting)
{
	int64_t     e1   = take("axd A");
	ax_store   *a    = open_fenced(e1);
	const char *p[1] = { "{d1}" }, *bad[1] = { "{1}" };
	PGresult   *r   = NULL;
	int64_t     gen = 0, cust = 0;

	cr_assert_eq(ax_store_prepare_generic(a, "t.gen", SQL_T_JOIN, 1),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_prepare_generic(a, "t.gen", SQL_T_JOIN, 1),
	             AX_OK, "registering twice is allowed");
	cr_assert_eq(ax_store_prepare_once(a, "t.cust", SQL_T_JOIN, 1), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_eq(
	    ax_store_prepare_generic(
	        a, "t.bad", "SELECT 1 / (cardinality($1::int[]) - 1)", 1),
	    AX_OK, "%s", ax_err_detail());
	for (int i = 0; i < 2; i++) {
		/* first statement of a transaction, with the fence */
		cr_assert_eq(ax_store_begin(a), AX_OK);
		cr_assert_eq(ax_store_query_prepared(a, "t.gen", 1, p, &r),
		             AX_OK, "%s", ax_err_detail());
		cr_assert_eq(PQntuples(r), 1);
		cr_assert_eq(strtoll(PQgetvalue(r, 0, 0), NULL, 10), dag_id);
		PQclear(r);
		/* a later statement, then deferred ones */
		cr_assert_eq(ax_store_query_prepared(a, "t.gen", 1, p, &r),
		             AX_OK, "%s", ax_err_detail());
		cr_assert_eq(PQntuples(r), 1);
		PQclear(r);
		cr_assert_eq(ax_store_write_deferred(a, "t.gen", 1, p), AX_OK,
		             "%s", ax_err_detail());
		cr_assert_eq(ax_store_write_deferred(a, "t.gen", 1, p), AX_OK,
		             "%s", ax_err_detail());
		cr_assert_eq(ax_store_commit(a), AX_OK, "%s", ax_err_detail());
		assert_plan_mode_auto(a);
		/* the same SQL registered plainly, and on its own */
		cr_assert_eq(ax_store_query_prepared(a, "t.cust", 1, p, NULL),
		             AX_OK, "%s", ax_err_detail());
		cr_assert_eq(ax_store_query_prepared(a, "t.cust", 1, p, NULL),
		             AX_OK, "%s", ax_err_detail());
		cr_assert_eq(ax_store_query_prepared(a, "t.cust", 1, p, NULL),
		             AX_OK, "%s", ax_err_detail());
	}
	plans_of(a, "t.gen", &gen, &cust);
	cr_assert_eq(cust, 0, "t.gen was planned for its values %lld times",
	             (long long) cust);
	cr_assert_geq(gen, 8, "t.gen ran %lld times generic", (long long) gen);
	plans_of(a, "t.cust", &gen, &cust);
	cr_assert_geq(cust, 5, "t.cust: %lld custom plans", (long long) cust);
	assert_plan_mode_auto(a);
	/* a generic statement that fails: as a later statement, as the
	 * first, deferred (the COMMIT's error) and on its own; the setting
	 * goes with the aborted transaction */
	for (int later = 1; later >= 0; later--) {
		cr_assert_eq(ax_store_begin(a), AX_OK);
		if (later)
			cr_assert_eq(
			    ax_store_query_prepared(a, "t.gen", 1, p, NULL),
			    AX_OK, "%s", ax_err_detail());
		cr_assert_neq(
		    ax_store_query_prepared(a, "t.bad", 1, bad, NULL), AX_OK);
		cr_assert_str_eq(ax_store_error_sqlstate(a), "22012");
		cr_assert_eq(ax_store_rollback(a), AX_OK);
		assert_plan_mode_auto(a);
	}
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(insert_dag(a, "gen-0"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_write_deferred(a, "t.bad", 1, bad), AX_OK);
	cr_assert_neq(ax_store_commit(a), AX_OK);
	cr_assert(strstr(ax_err_detail(), "t.bad") != NULL, "%s",
	          ax_err_detail());
	cr_assert(!ax_store_in_tx(a));
	cr_assert_eq(dags_named("gen-0"), 0);
	assert_plan_mode_auto(a);
	cr_assert_eq(
	    ax_store_prepare_generic(
	        st, "t.bad", "SELECT 1 / (cardinality($1::int[]) - 1)", 1),
	    AX_OK, "%s", ax_err_detail());
	cr_assert_neq(ax_store_query_prepared(st, "t.bad", 1, bad, NULL),
	              AX_OK);
	assert_plan_mode_auto(st);
	cr_assert_eq(PQpipelineStatus(ax_store_conn(a)), PQ_PIPELINE_OFF);
	cr_assert_eq(PQpipelineStatus(ax_store_conn(st)), PQ_PIPELINE_OFF);
	ax_store_close(a);
}

/*
 * ax_store_warm plans every statement prepared on the store and runs
 * none: a generic statement has its generic plan before its first
 * execution, a statement that would delete every row with NULL
 * parameters deletes nothing, one that cannot be planned any more is
 * named in the error and does not keep the others from being planned;
 * the setting of plan_cache_mode is left as it was (also after that
 * failure, of a generic one), and a warm-up inside a transaction is
 * refused.
 */
Test(store, warm_plans_every_statement_and_runs_none)
{
	ax_store *a   = NULL;
	int64_t   gen = 0, cust = 0;
	PGresult *r = NULL;

	static const char *const ddl[] = {
		"CREATE TABLE warm_t (id int PRIMARY KEY, v text NOT NULL)",
		"CREATE TABLE warm_gone (id int)",
		"INSERT INTO warm_t VALUES (1, 'kept')",
	};
	/* the third would delete every row if it ran with NULL */
	static const ax_store_stmt_def defs[] = {
		{ "w.gone", "SELECT id FROM warm_gone WHERE id = $1", 1, 1 },
		{ "w.join", SQL_T_JOIN, 1, 1 },
		{ "w.ins",
		  "INSERT INTO warm_t (id, v) SELECT * FROM "
		  "unnest($1::int[], $2::text[])",
		  2, 1 },
		{ "w.del", "DELETE FROM warm_t WHERE id = $1 OR $1 IS NULL", 1,
		  0 },
	};

	cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &a), AX_OK, "%s",
	             ax_err_detail());
	for (size_t i = 0; i < sizeof(ddl) / sizeof(ddl[0]); i++)
		cr_assert_eq(ax_store_exec(a, ddl[i], 0, NULL), AX_OK, "%s",
		             ax_err_detail());
	cr_assert_eq(ax_store_prepare_all(a, defs, 4), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_store_warm(a), AX_OK, "%s", ax_err_detail());
	plans_of(a, "w.join", &gen, &cust);
	cr_assert_eq(gen, 1, "w.join: %lld generic plans", (long long) gen);
	cr_assert_eq(cust, 0);
	plans_of(a, "w.ins", &gen, &cust);
	cr_assert_eq(gen, 1, "w.ins: %lld generic plans", (long long) gen);
	plans_of(a, "w.del", &gen, &cust);
	cr_assert_eq(gen + cust, 1, "w.del planned %lld times",
	             (long long) (gen + cust));
	cr_assert_eq(ax_store_query(a, "SELECT string_agg(v, ',') FROM warm_t",
	                            0, NULL, &r),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_str_eq(PQgetvalue(r, 0, 0), "kept", "a statement ran");
	PQclear(r);
	assert_plan_mode_auto(a);
	/* a statement whose table went away: named, the others planned */
	cr_assert_eq(ax_store_exec(a, "DROP TABLE warm_gone", 0, NULL), AX_OK);
	cr_assert_neq(ax_store_warm(a), AX_OK);
	cr_assert(strstr(ax_err_detail(), "w.gone") != NULL, "%s",
	          ax_err_detail());
	plans_of(a, "w.ins", &gen, &cust);
	cr_assert_eq(gen, 2, "w.ins not planned after the failed one");
	assert_plan_mode_auto(a);
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(ax_store_warm(a), AX_EINVAL);
	cr_assert_eq(ax_store_rollback(a), AX_OK);
	cr_assert_eq(PQpipelineStatus(ax_store_conn(a)), PQ_PIPELINE_OFF);
	ax_store_close(a);
}
