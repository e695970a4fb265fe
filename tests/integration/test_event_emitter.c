/*
 * test_event_emitter.c - the event emitter's event_log sink against a real
 * PostgreSQL: events that PostgreSQL refuses for their content, and a
 * database that is down.
 *
 * An event emitter runs in a real actor system; events go in through an
 * actor client like any producer's, several in one message so that they
 * reach event_log in one batch. The refused events are ones a producer
 * bug can make: a reason or a trace id with an invalid UTF-8 byte (what a
 * trace read from freed memory looked like) and a time before
 * timestamptz's range. (A payload that is not valid JSON text, \u0000 or
 * invalid UTF-8 included, is re-encoded by the store and never fails the
 * insert.) Covers: the good rows of a batch are written around the
 * refused ones (INSERT and COPY sizes), each refused event lands in
 * event_dead_letter with its envelope and is counted (component_stats and
 * /metrics), the emitter goes on writing; a refused dead letter is
 * dropped and counted; an outage dead-letters nothing and loses nothing.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_metrics.h"
#include "ax_config.h"
#include "clock.h"
#include "event_emitter.h"
#include "log.h"
#include "pg_harness.h"
#include "store_fixture.h"
#include "store.h"
#include "uuid.h"

static ax_test_pg       *pg;
static ax_store         *st;
static ax_config        *cfg;
static ax_pipeline_ctx   ctx;
static ax_actor_system  *sys;
static ax_actor_client  *cli;
static ax_event_emitter *em;

static void
setup(void)
{
	ax_log_init(AX_LOG_ERROR, 2);
	cr_assert_eq(ax_test_pg_start_migrated(&pg), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &st), AX_OK);
	cr_assert_eq(ax_config_load(NULL, &cfg), AX_OK);
	/* a PUB address of its own: tests run in parallel */
	char pub[128];
	snprintf(pub, sizeof(pub), "ipc:///tmp/ax-test-emitter-%d.ipc",
	         (int) getpid());
	cr_assert_eq(ax_config_set(cfg, "events.pub", pub), AX_OK);
	ctx     = (ax_pipeline_ctx) { 0 };
	ctx.cfg = cfg;
	ctx.dsn = ax_test_pg_dsn(pg);
	cr_assert_eq(ax_actor_system_new(&sys), AX_OK);
	cr_assert_eq(ax_event_emitter_add(sys, &ctx, &em), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_actor_system_start(sys), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_actor_client_new(sys, "test", &cli), AX_OK);
}

/* Stops the system: the emitter writes its counters at stop. */
static void
stop(void)
{
	ax_actor_client_free(cli);
	cli = NULL;
	ax_actor_system_free(sys);
	sys = NULL;
}

static void
teardown(void)
{
	if (sys != NULL)
		stop();
	ax_config_free(cfg);
	ax_store_close(st);
	ax_test_pg_stop(pg);
}

TestSuite(event_emitter, .init = setup, .fini = teardown, .timeout = 120);

enum { GOOD = 0, BAD_UTF8, BAD_TRACE, BAD_TIME };

#define BATCH_MAX 512

/* Event ids of what was sent, for the checks. */
typedef struct sent {
	char   id[BATCH_MAX][AX_UUID_LEN];
	int    kind[BATCH_MAX];
	size_t n;
} sent;

/* Sends kinds[0..n) as n events in ONE message to the emitter. */
static void
send_batch(sent *out, const int *kinds, size_t n)
{
	ax_actor_item *it  = calloc(n, sizeof(*it));
	uint8_t(*buf)[512] = calloc(n, sizeof(*buf));

	cr_assert(it != NULL && buf != NULL && n <= BATCH_MAX);
	out->n = n;
	for (size_t i = 0; i < n; i++) {
		Ax__Event e    = AX__EVENT__INIT;
		e.id           = ax_uuid_v4(out->id[i]);
		e.type         = "instance.running";
		e.time_us      = ax_clock_utc_us();
		e.dag          = "etl";
		e.dag_run_id   = 42;
		e.instance_id  = (int64_t) i + 1;
		e.task         = "load";
		e.source       = "test";
		e.trace_id     = "0af7651916cd43dd8448eb211c80319c";
		e.payload_json = "{\"n\":1}";
		out->kind[i]   = kinds[i];
		switch (kinds[i]) {
		case BAD_UTF8:
			e.reason = "WAIT_\xff\xfeRESOURCE";
			break;
		case BAD_TRACE:
			e.trace_id = "0af76519\xc3\x28";
			break;
		case BAD_TIME:
			e.time_us = INT64_MIN / 2; /* 144,000 BC */
			break;
		default:
			break;
		}
		size_t len = ax__event__pack(&e, buf[i]);
		it[i]      = (ax_actor_item) { .type = AX_ITEM_EVENT,
			                       .len  = (uint32_t) len,
			                       .data = buf[i] };
	}
	cr_assert_eq(ax_actor_client_send(cli, AX_A_EVENT_EMITTER, it, n, 0),
	             AX_OK);
	free(it);
	free(buf);
}

#define q_int(...) ax_test_q_int(st, __VA_ARGS__)

/* Rows of table with event_id id. */
static int64_t
rows_with_id(const char *table, const char *id)
{
	return q_int("SELECT count(*) FROM %s WHERE event_id = '%s'", table,
	             id);
}

/* Waits up to 20 s for stored >= want_stored and dead_lettered + dropped
 * refused >= want_refused. */
static ax_event_emitter_stats
wait_for(uint64_t want_stored, uint64_t want_refused)
{
	ax_event_emitter_stats s;
	int64_t                end = ax_clock_mono_us() + 20 * AX_USEC_PER_SEC;
	do {
		ax_event_emitter_stats_get(em, &s);
		if (s.stored >= want_stored &&
		    s.dead_lettered + s.refused_dropped >= want_refused)
			break;
		ax_clock_sleep_us(10000);
	} while (ax_clock_mono_us() < end);
	return s;
}

/* Checks that every good event of b is in event_log once, and every bad
 * one is in event_dead_letter once (dead: 1) or nowhere (dead: 0). */
static void
check_sent(const sent *b, int dead)
{
	for (size_t i = 0; i < b->n; i++) {
		int good = b->kind[i] == GOOD;
		cr_assert_eq(rows_with_id("event_log", b->id[i]), good,
		             "event %zu (kind %d) in event_log", i,
		             b->kind[i]);
		cr_assert_eq(rows_with_id("event_dead_letter", b->id[i]),
		             good ? 0 : dead,
		             "event %zu (kind %d) dead letter", i, b->kind[i]);
	}
}

/* The envelope kept for id decodes to the event that was sent. */
static void
check_envelope(const char *id, int kind)
{
	char      sql[256];
	PGresult *r = NULL;
	size_t    len;

	snprintf(sql, sizeof(sql),
	         "SELECT envelope, error FROM event_dead_letter WHERE "
	         "event_id = '%s'",
	         id);
	cr_assert_eq(ax_store_query(st, sql, 0, NULL, &r), AX_OK);
	cr_assert_eq(PQntuples(r), 1);
	unsigned char *raw =
	    PQunescapeBytea((const unsigned char *) PQgetvalue(r, 0, 0), &len);
	cr_assert_not_null(raw);
	Ax__Event *e = ax__event__unpack(NULL, len, raw);
	cr_assert_not_null(e, "the envelope is not an ax.Event");
	cr_assert_str_eq(e->id, id);
	cr_assert_str_eq(e->type, "instance.running");
	if (kind == BAD_UTF8)
		cr_assert_str_eq(e->reason, "WAIT_\xff\xfeRESOURCE");
	if (kind == BAD_TRACE)
		cr_assert_str_eq(e->trace_id, "0af76519\xc3\x28");
	const char *why  = PQgetvalue(r, 0, 1);
	const char *want = kind == BAD_UTF8 ? "invalid byte sequence"
	    : kind == BAD_TRACE             ? "invalid byte sequence"
	                                    : "out of range";
	cr_assert_not_null(strstr(why, want), "error: %s", why);
	ax__event__free_unpacked(e, NULL);
	PQfreemem(raw);
	PQclear(r);
}

/*
 * One batch of 21 (the INSERT path) with three refused events between
 * good ones, then one of 300 (the COPY path) with one refused event in the
 * middle, then a good batch: every good event is in event_log, every
 * refused one in event_dead_letter with its envelope and the error, the
 * counter says 4, and /metrics shows it. Before dead letters, the first
 * batch failed as a whole and the emitter retried it for good: nothing
 * after it was ever written.
 */
Test(event_emitter, refused_events_are_dead_lettered_and_the_rest_written)
{
	static sent a, b, c;
	int         kinds[300] = { 0 };

	kinds[3]  = BAD_UTF8;
	kinds[10] = BAD_TRACE;
	kinds[17] = BAD_TIME;
	send_batch(&a, kinds, 21);
	ax_event_emitter_stats s = wait_for(18, 3);
	cr_assert_eq(s.stored, 18, "stored %llu",
	             (unsigned long long) s.stored);
	cr_assert_eq(s.dead_lettered, 3);
	check_sent(&a, 1);
	check_envelope(a.id[3], BAD_UTF8);
	check_envelope(a.id[10], BAD_TRACE);
	check_envelope(a.id[17], BAD_TIME);

	memset(kinds, 0, sizeof(kinds));
	kinds[150] = BAD_UTF8;
	send_batch(&b, kinds, 300);
	s = wait_for(18 + 299, 4);
	cr_assert_eq(s.stored, 18 + 299, "stored %llu",
	             (unsigned long long) s.stored);
	cr_assert_eq(s.dead_lettered, 4);
	check_sent(&b, 1);

	/* events after them still land */
	memset(kinds, 0, sizeof(kinds));
	send_batch(&c, kinds, 5);
	s = wait_for(18 + 299 + 5, 4);
	cr_assert_eq(s.stored, 18 + 299 + 5);
	check_sent(&c, 1);
	cr_assert_eq(s.refused_dropped, 0);
	cr_assert_eq(s.dropped, 0);
	cr_assert_eq(q_int("SELECT count(*) FROM event_dead_letter"), 4);
	/* event_log's ids follow arrival: the batches were written in order */
	cr_assert_eq(q_int("SELECT count(*) FROM event_log WHERE instance_id "
	                   "= 5 AND id > (SELECT max(id) FROM event_log WHERE "
	                   "instance_id = 300)"),
	             1);

	/* the counter reaches component_stats and /metrics */
	stop();
	ax_buf m = { 0 };
	cr_assert_eq(ax_api_metrics_render_sinks(st, &m), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_not_null(m.p);
	static const char *const want[] = {
		"# TYPE ax_events_dead_lettered_total counter\n",
		"ax_events_dead_lettered_total{sink=\"event_log\"} 4\n",
		"ax_event_sink_dropped_total{sink=\"event_log\",reason="
		"\"refused\"} 0\n",
		"ax_event_sink_delivered_total{sink=\"event_log\"} 322\n",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_assert_not_null(strstr(m.p, want[i]), "want %s in:\n%s",
		                   want[i], m.p);
	ax_buf_fini(&m);
}

/*
 * When event_dead_letter refuses the event too (here a constraint an
 * operator added), the event is dropped and counted, and the emitter
 * still goes on.
 */
Test(event_emitter, a_refused_dead_letter_is_dropped_and_counted)
{
	static sent a, b;
	int         kinds[8] = { 0 };

	cr_assert_eq(
	    ax_store_exec(st,
	                  "ALTER TABLE event_dead_letter ADD "
	                  "CONSTRAINT nothing CHECK (false) NOT VALID",
	                  0, NULL),
	    AX_OK, "%s", ax_err_detail());
	kinds[4] = BAD_UTF8;
	send_batch(&a, kinds, 8);
	ax_event_emitter_stats s = wait_for(7, 1);
	cr_assert_eq(s.stored, 7);
	cr_assert_eq(s.dead_lettered, 0);
	cr_assert_eq(s.refused_dropped, 1);
	check_sent(&a, 0);
	memset(kinds, 0, sizeof(kinds));
	send_batch(&b, kinds, 8);
	s = wait_for(15, 1);
	cr_assert_eq(s.stored, 15);
	check_sent(&b, 0);
	stop();
	cr_assert_eq(q_int("SELECT value FROM component_stats WHERE component "
	                   "= 'event_sink.event_log' AND key = "
	                   "'dropped.refused'"),
	             1);
}

/*
 * A database that is down is not a bad row: events sent meanwhile (a
 * refused one among them) stay buffered, nothing is dead-lettered, and
 * once PostgreSQL is back the good ones are written and only the refused
 * one is dead-lettered.
 */
Test(event_emitter, an_outage_dead_letters_nothing)
{
	static sent  a;
	int          kinds[40] = { 0 };
	ax_pg_embed *e         = ax_test_pg_embed(pg);

	cr_assert_eq(ax_pg_embed_down(e), AX_OK, "%s", ax_err_detail());
	kinds[20] = BAD_TRACE;
	send_batch(&a, kinds, 40);
	ax_event_emitter_stats s;
	int64_t                end = ax_clock_mono_us() + 10 * AX_USEC_PER_SEC;
	do {
		ax_clock_sleep_us(50000);
		ax_event_emitter_stats_get(em, &s);
	} while (s.failures < 3 && ax_clock_mono_us() < end);
	cr_assert_geq(s.failures, 3, "the writes were retried");
	cr_assert_eq(s.buffered, 40);
	cr_assert_eq(s.stored, 0);
	cr_assert_eq(s.dead_lettered + s.refused_dropped, 0,
	             "an outage dead-lettered events");
	cr_assert_eq(ax_pg_embed_up(e), AX_OK, "%s", ax_err_detail());
	s = wait_for(39, 1);
	cr_assert_eq(s.stored, 39);
	cr_assert_eq(s.dead_lettered, 1);
	cr_assert_eq(s.buffered, 0);
	cr_assert_eq(s.dropped, 0);
	/* the test's own connection was cut by the restart: a new one */
	ax_store_close(st);
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &st), AX_OK);
	check_sent(&a, 1);
}
