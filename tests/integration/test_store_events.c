/*
 * test_store_events.c - event rows in a real PostgreSQL: payloads
 * joined with the row's context, kept raw where jsonb refuses them,
 * each event id stored once by COPY and by the small-batch insert, also
 * past a concurrent writer (fixture: store_suite.h).
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

/* Events: the stored payload joins the row's context (dag, task, source,
 * logical time, shards when sharded) with the event's own payload, which
 * wins on a clash; a non-object payload is kept as {"raw": text}; a
 * re-sent event_id is stored once; a bad event_id is skipped. */
/* Payloads are spliced into the stored object without a JSON library
 * when they are valid objects; what jsonb would refuse is kept raw and
 * never fails the batch (the statement would abort the transaction). */
Test(store, event_payloads_that_jsonb_refuses_are_kept_raw)
{
	static const char *const pl[] = {
		"{\"a\":\"\\u0000\"}", /* jsonb refuses \u0000 */
		"{\"a\":\"\\ud800\"}", /* unpaired surrogate */
		"{\"a\":1,}",          /* not JSON */
		"{\"a\":1e200000}",    /* past jsonb's numeric range */
		" { \"x\" : [1, {\"y\": \"caf\xc3\xa9\"}] } ", /* fine */
		"{}",
	};
	enum { N = sizeof(pl) / sizeof(pl[0]) };
	ax_store_event_row r[N];
	char               ids[N][37];
	size_t             ins = 0;

	memset(r, 0, sizeof(r));
	for (int i = 0; i < N; i++) {
		snprintf(ids[i], sizeof(ids[i]),
		         "0190a6e0-0000-7000-8000-00000000010%d", i);
		r[i].event_id     = ids[i];
		r[i].type         = "instance.succeeded";
		r[i].time_us      = LOGICAL_US;
		r[i].dag          = "d1";
		r[i].task         = "t\"q\\\n"; /* escaped in the payload */
		r[i].payload_json = pl[i];
	}
	cr_assert_eq(ax_store_insert_events(st, r, N, &ins, NULL), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ins, N);
	cr_assert_eq(
	    q64("SELECT count(*) FROM event_log WHERE payload->>'task' "
	        "= E't\"q\\\\\\n' AND payload->>'dag' = 'd1'"),
	    N, "every payload names the task, escaped");
	for (int i = 0; i < 4; i++) {
		char q[512];
		snprintf(
		    q, sizeof(q),
		    "SELECT count(*) FROM event_log WHERE event_id = '%s' "
		    "AND payload ? 'raw' AND NOT payload ? 'a'",
		    ids[i]);
		cr_assert_eq(q64(q), 1, "payload %d kept raw", i);
	}
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE "
	                 "payload->'x'->1->>'y' = E'caf\\u00e9' AND NOT "
	                 "payload ? 'raw'"),
	             1, "a valid object's members are kept as they are");
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE event_id = "
	                 "'0190a6e0-0000-7000-8000-000000000105' AND "
	                 "payload = '{\"dag\": \"d1\", \"task\": "
	                 "\"t\\\"q\\\\\\n\"}'::jsonb"),
	             1, "an empty object adds nothing");
}

/* A batch of 128 events or more goes in through COPY: text with COPY's
 * special bytes arrives as written, an id twice in a batch (or in another
 * case) is stored once, and an unknown DAG name leaves dag_id NULL. The
 * same rows in a small batch take the INSERT path and must end the same.
 */
static void
copy_batch(int big, const char *prefix)
{
	enum { N = 200 };
	static ax_store_event_row r[N];
	static char               ids[N][37];
	size_t                    n = big ? N : 4, ins = 0, skip = 0;
	char                      q[768];

	memset(r, 0, sizeof(r));
	for (size_t i = 0; i < n; i++) {
		snprintf(ids[i], sizeof(ids[i]), "%s-7000-8000-%012zu", prefix,
		         i);
		r[i].event_id = ids[i];
		r[i].type     = "instance.failed";
		r[i].time_us  = LOGICAL_US + 123456;
		r[i].dag      = "d1";
	}
	r[0].reason   = "tab\there\nnew\\N line\r";
	r[0].trace_id = "\\N";
	r[0].payload_json =
	    "{\"error\":\"a\\tb\\\\c\", \"raw\\tjson\":\"\\n\"}";
	/* row 1: row 0's id in upper case; row 3: row 2's id again */
	snprintf(ids[1], sizeof(ids[1]), "%s", ids[0]);
	for (char *c = ids[1]; *c; c++)
		*c = (char) (*c >= 'a' && *c <= 'f' ? *c - 32 : *c);
	r[2].dag = "no-such-dag";
	snprintf(ids[3], sizeof(ids[3]), "%s", ids[2]);
	cr_assert_eq(ax_store_insert_events(st, r, n, &ins, &skip), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_eq(ins, n - 2);
	cr_assert_eq(skip, 0);
	snprintf(q, sizeof(q),
	         "SELECT count(*) FROM event_log WHERE event_id = '%s' AND "
	         "reason = E'tab\\there\\nnew\\\\N line\\r' AND trace_id = "
	         "E'\\\\N' AND payload->>'error' = E'a\\tb\\\\c' AND "
	         "payload->>E'raw\\tjson' = E'\\n' AND "
	         "ax_us(time) = 1774749600123456",
	         ids[0]);
	cr_assert_eq(q64(q), 1, "text fields arrive byte for byte");
	snprintf(q, sizeof(q),
	         "SELECT count(*) FROM event_log WHERE event_id = '%s' AND "
	         "dag_id IS NULL AND payload->>'dag' = 'no-such-dag'",
	         ids[2]);
	cr_assert_eq(q64(q), 1,
	             "an unknown DAG: no dag_id, the name in the payload");
	snprintf(q, sizeof(q),
	         "SELECT count(*) FROM event_log WHERE event_id = '%.36s' "
	         "AND dag_id = %lld",
	         ids[0], (long long) dag_id);
	cr_assert_eq(q64(q), 1, "a known DAG's id is stored");
	/* the same batch again: all stored already */
	cr_assert_eq(ax_store_insert_events(st, r, n, &ins, &skip), AX_OK);
	cr_assert_eq(ins, 0);
	snprintf(q, sizeof(q),
	         "SELECT count(*) FROM event_log WHERE event_id::text LIKE "
	         "'%.20s-%%'",
	         prefix);
	cr_assert_eq(q64(q), (int64_t) n - 2);
}

Test(store, events_copy_keeps_text_and_stores_each_id_once)
{
	copy_batch(1, "0190a6e0-0001");
}

Test(store, events_small_batch_keeps_text_and_stores_each_id_once)
{
	copy_batch(0, "0190a6e0-0002");
}

/* Another writer holds an uncommitted row with one of the batch's ids:
 * the lookup does not see it, the COPY waits on the unique key and fails
 * once it commits. The transaction runs again and leaves the id out:
 * nothing lost, nothing twice (the INSERT path waits and skips it). */
static void *
commit_later(void *arg)
{
	ax_clock_sleep_us(300000);
	PQclear(PQexec(arg, "COMMIT"));
	return NULL;
}

typedef struct ev_batch {
	ax_store_event_row *rows;
	size_t              n;
} ev_batch;

static ax_err
ev_batch_tx(ax_store *s, void *arg)
{
	ev_batch *b = arg;
	return ax_store_insert_events(s, b->rows, b->n, NULL, NULL);
}

Test(store, events_copy_runs_again_past_a_concurrent_writer)
{
	enum { N = 200 };
	static ax_store_event_row r[N];
	static char               ids[N][37];
	pthread_t                 t;
	PGconn                   *other = PQconnectdb(ax_test_pg_dsn(pg));

	cr_assert_eq(PQstatus(other), CONNECTION_OK);
	for (int i = 0; i < N; i++) {
		snprintf(ids[i], sizeof(ids[i]),
		         "0190a6e0-0003-7000-8000-%012d", i);
		r[i] = (ax_store_event_row) { .event_id = ids[i],
			                      .type     = "instance.running",
			                      .time_us  = LOGICAL_US };
	}
	PQclear(PQexec(other, "BEGIN"));
	/* the same event (id and time: event_log is unique per both, 0015)
	 * from another writer */
	char oins[256];
	snprintf(oins, sizeof(oins),
	         "INSERT INTO event_log (event_id, type, time) VALUES "
	         "('0190a6e0-0003-7000-8000-000000000007', 'other.writer', "
	         "ax_ts(%lld))",
	         (long long) LOGICAL_US);
	PGresult *res = PQexec(other, oins);
	cr_assert_eq(PQresultStatus(res), PGRES_COMMAND_OK, "%s",
	             PQerrorMessage(other));
	PQclear(res);
	cr_assert_eq(pthread_create(&t, NULL, commit_later, other), 0);
	ev_batch b = { r, N };
	cr_assert_eq(ax_store_tx(st, ev_batch_tx, &b), AX_OK, "%s",
	             ax_err_detail());
	pthread_join(t, NULL);
	PQfinish(other);
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE event_id::text "
	                 "LIKE '0190a6e0-0003-%'"),
	             N, "every id once");
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE type = "
	                 "'other.writer'"),
	             1, "the other writer's row is the one kept");
}

Test(store, events_payload_idempotence_and_bad_rows)
{
	ax_store_event_row r[4];
	size_t             ins = 0, skip = 0;
	char               q[512];

	memset(r, 0, sizeof(r));
	for (int i = 0; i < 4; i++) {
		r[i].type            = "instance.running";
		r[i].time_us         = LOGICAL_US;
		r[i].dag             = "d1";
		r[i].dag_run_id      = run_id;
		r[i].task            = "t";
		r[i].source          = "test";
		r[i].logical_time_us = LOGICAL_US;
		r[i].shard_total     = 1;
	}
	r[0].event_id     = "0190a6e0-0000-7000-8000-000000000001";
	r[0].payload_json = "{\"worker\":\"w1\",\"source\":\"mine\"}";
	r[1].event_id     = "0190a6e0-0000-7000-8000-000000000002";
	r[1].payload_json = "[1,2]";
	r[1].shard_index  = 2;
	r[1].shard_total  = 3;
	r[2].event_id     = "not-a-uuid";
	r[3].event_id     = "0190a6e0-0000-7000-8000-000000000003";
	cr_assert_eq(ax_store_insert_events(st, r, 4, &ins, &skip), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_eq(ins, 3);
	cr_assert_eq(skip, 1);
	snprintf(q, sizeof(q),
	         "SELECT count(*) FROM event_log WHERE event_id = "
	         "'0190a6e0-0000-7000-8000-000000000001' AND dag_id = %lld "
	         "AND payload = '{\"dag\": \"d1\", \"task\": \"t\", "
	         "\"source\": \"mine\", \"worker\": \"w1\", "
	         "\"logical_time_us\": %lld}'::jsonb",
	         (long long) dag_id, (long long) LOGICAL_US);
	cr_assert_eq(q64(q), 1, "payload of the first event");
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE event_id = "
	                 "'0190a6e0-0000-7000-8000-000000000002' AND "
	                 "payload->>'raw' = '[1,2]' AND "
	                 "(payload->>'shard_index')::int = 2 AND "
	                 "(payload->>'shard_total')::int = 3"),
	             1, "non-object payload kept raw, shards recorded");
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE event_id = "
	                 "'0190a6e0-0000-7000-8000-000000000003' AND NOT "
	                 "payload ? 'shard_index' AND payload ? 'dag'"),
	             1, "an unsharded event has no shard keys");
	/* the same events again: nothing new */
	cr_assert_eq(ax_store_insert_events(st, r, 4, &ins, &skip), AX_OK);
	cr_assert_eq(ins, 0);
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE event_id::text "
	                 "LIKE '0190a6e0-%'"),
	             3);
}
