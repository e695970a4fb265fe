/*
 * test_sinks.c - the event emitter's PUB and OpenLineage sinks
 * (actors/sinks/sink_pub.h, actors/sinks/sink_openlineage.h) and their
 * counters in component_stats / ax-api's /metrics.
 *
 * An event emitter runs in a real actor system; events go in through an
 * actor client like any producer's. A SUB socket checks topics and JSON;
 * a libmicrohttpd receiver on a free loopback port collects the
 * OpenLineage POSTs, which python3-jsonschema validates against the
 * official schema kept in tests/openlineage/OpenLineage.json
 * ($defs/RunEvent, Draft 2020-12). One PostgreSQL cluster for the suite
 * (the counters test).
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <microhttpd.h>
#include <nng/nng.h>
#include <nng/protocol/pubsub0/sub.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_metrics.h"
#include "ax_config.h"
#include "clock.h"
#include "event_emitter.h"
#include "http_rx.h"
#include "log.h"
#include "pg_harness.h"
#include "sink_openlineage.h"
#include "store.h"
#include "uuid.h"

#define RUN_ID "3f2c8f0e-5a8b-4c1e-9d2a-0b6f1e2d3c4a"

static ax_test_pg       *pg;
static ax_config        *cfg;
static ax_pipeline_ctx   ctx;
static ax_actor_system  *sys;
static ax_actor_client  *cli;
static ax_event_emitter *em;
static const char       *alert_am; /* alerts.alertmanager_url for setup */

/* the OpenLineage receiver (tests/http_rx.h) */
static ax_http_rx rx = AX_HTTP_RX_INIT;

/* ---------------------------------------------------------------------- */
/* fixture */

static void
suite_init(void)
{
	ax_log_init(AX_LOG_ERROR, 2);
	cr_assert_eq(ax_test_pg_start_migrated(&pg), AX_OK, "%s",
	             ax_err_detail());
}

static void
suite_fini(void)
{
	ax_test_pg_stop(pg);
}

static void
setup(const char *ol_url, const char *buffer, int with_db)
{
	char pub[128];
	snprintf(pub, sizeof(pub), "ipc:///tmp/ax-test-sinks-%d.ipc",
	         (int) getpid());
	cr_assert_eq(ax_config_load(NULL, &cfg), AX_OK);
	cr_assert_eq(ax_config_set(cfg, "events.pub", pub), AX_OK);
	cr_assert_eq(ax_config_set(cfg, "openlineage.url", ol_url), AX_OK);
	cr_assert_eq(ax_config_set(cfg, "openlineage.namespace", "prod-ax"),
	             AX_OK);
	cr_assert_eq(ax_config_set(cfg, "openlineage.buffer", buffer), AX_OK);
	if (alert_am != NULL) {
		cr_assert_eq(
		    ax_config_set(cfg, "alerts.alertmanager_url", alert_am),
		    AX_OK);
		cr_assert_eq(ax_config_set(cfg, "alerts.buffer", buffer),
		             AX_OK);
	}
	ctx     = (ax_pipeline_ctx) { 0 };
	ctx.cfg = cfg;
	ctx.dsn = with_db ? ax_test_pg_dsn(pg) : NULL;
	cr_assert_eq(ax_actor_system_new(&sys), AX_OK);
	cr_assert_eq(ax_event_emitter_add(sys, &ctx, &em), AX_OK, "%s",
	             ax_err_detail());
}

static void
start(void)
{
	cr_assert_eq(ax_actor_system_start(sys), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_actor_client_new(sys, "test", &cli), AX_OK);
}

static void
teardown(void)
{
	ax_actor_client_free(cli);
	cli = NULL;
	ax_actor_system_free(sys);
	sys = NULL;
	ax_config_free(cfg);
	ax_http_rx_reset(&rx);
	alert_am = NULL;
}

/* Sends one event of type to the emitter, about task `task` of DAG "etl"
 * (task NULL: about the DAG run). */
static void
send_event(const char *type, const char *task)
{
	Ax__Event     e = AX__EVENT__INIT;
	char          id[AX_UUID_LEN];
	uint8_t       buf[1024];
	ax_actor_item it;

	e.id         = ax_uuid_v4(id);
	e.type       = (char *) type;
	e.time_us    = 1767225600123456LL; /* 2026-01-01T00:00:00.123456Z */
	e.dag        = "etl";
	e.dag_run_id = 42;
	e.logical_time_us = 1767139200000000LL; /* 2025-12-31T00:00:00Z */
	e.source          = "test";
	e.payload_json    = "{\"from\":\"READY\",\"to\":\"RUNNING\"}";
	if (task != NULL) {
		e.task        = (char *) task;
		e.instance_id = 7;
		e.run_id      = RUN_ID;
		e.attempt     = 1;
	}
	size_t len = ax__event__pack(&e, buf);
	it         = (ax_actor_item) { .type = AX_ITEM_EVENT,
		                       .len  = (uint32_t) len,
		                       .data = buf };
	cr_assert_eq(ax_actor_client_send(cli, AX_A_EVENT_EMITTER, &it, 1, 0),
	             AX_OK);
}

static ax_event_emitter_stats
wait_stats(int (*done)(const ax_event_emitter_stats *), int64_t max_us)
{
	ax_event_emitter_stats s;
	int64_t                end = ax_clock_mono_us() + max_us;
	do {
		ax_event_emitter_stats_get(em, &s);
		if (done(&s))
			break;
		ax_clock_sleep_us(5000);
	} while (ax_clock_mono_us() < end);
	return s;
}

TestSuite(sinks, .init = suite_init, .fini = suite_fini, .timeout = 120);

/* ---------------------------------------------------------------------- */
/* PUB */

static nng_socket
sub_open(const char *topic, size_t topic_len)
{
	nng_socket s;
	char       pub[128];
	snprintf(pub, sizeof(pub), "ipc:///tmp/ax-test-sinks-%d.ipc",
	         (int) getpid());
	cr_assert_eq(nng_sub0_open(&s), 0);
	cr_assert_eq(
	    nng_socket_set(s, NNG_OPT_SUB_SUBSCRIBE, topic, topic_len), 0);
	cr_assert_eq(nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 3000), 0);
	cr_assert_eq(nng_dial(s, pub, NULL, 0), 0);
	return s;
}

/* Receives one message: topic (up to the NUL) and the parsed JSON. */
static json_t *
sub_recv(nng_socket s, char *topic, size_t tlen)
{
	char  *buf = NULL;
	size_t sz  = 0;
	int    rv  = nng_recv(s, &buf, &sz, NNG_FLAG_ALLOC);
	if (rv != 0)
		return NULL;
	char *nul = memchr(buf, '\0', sz);
	cr_assert_not_null(nul, "message without the NUL separator");
	snprintf(topic, tlen, "%s", buf);
	json_t *j =
	    json_loadb(nul + 1, sz - (size_t) (nul + 1 - buf), 0, NULL);
	nng_free(buf, sz);
	cr_assert_not_null(j, "payload after the topic is not JSON");
	return j;
}

Test(sinks, pub_subscribers_get_topic_and_json)
{
	char    topic[64];
	json_t *j;

	setup("", "10", 0);
	start();
	ax_event_emitter_stats s;
	/* no subscriber yet: the event is not even encoded */
	send_event("run.created", NULL);
	for (int i = 0; i < 200; i++) {
		ax_event_emitter_stats_get(em, &s);
		if (s.events == 1)
			break;
		ax_clock_sleep_us(10000);
	}
	cr_assert_eq(s.pub_unheard, 1);
	cr_assert_eq(s.pub_published, 0);
	nng_socket all  = sub_open("", 0);
	nng_socket runs = sub_open("run.", 4);
	/* exact type: the topic plus its NUL separator */
	nng_socket exact = sub_open("instance.succeeded", 19);
	ax_clock_sleep_us(300000); /* let the subscriptions attach */
	send_event("run.created", NULL);
	send_event("instance.running", "load");
	send_event("instance.succeeded", "load");
	send_event("instance.succeeded.x", "load"); /* not "exact" */

	j = sub_recv(all, topic, sizeof(topic));
	cr_assert_not_null(j, "no message on the all-topics subscriber");
	cr_assert_str_eq(topic, "run.created");
	cr_assert_str_eq(json_string_value(json_object_get(j, "type")),
	                 "run.created");
	cr_assert_str_eq(json_string_value(json_object_get(j, "dag")), "etl");
	cr_assert_eq(json_integer_value(json_object_get(j, "dag_run_id")), 42);
	cr_assert_str_eq(json_string_value(json_object_get(j, "time")),
	                 "2026-01-01T00:00:00.123456Z");
	cr_assert(ax_uuid_valid(json_string_value(json_object_get(j, "id"))));
	json_decref(j);
	j = sub_recv(all, topic, sizeof(topic));
	cr_assert_not_null(j);
	cr_assert_str_eq(topic, "instance.running");
	cr_assert_str_eq(json_string_value(json_object_get(j, "task")),
	                 "load");
	cr_assert_str_eq(json_string_value(json_object_get(j, "run_id")),
	                 RUN_ID);
	cr_assert_str_eq(json_string_value(json_object_get(
	                     json_object_get(j, "payload"), "to")),
	                 "RUNNING");
	json_decref(j);

	/* prefix subscription: only run.* */
	j = sub_recv(runs, topic, sizeof(topic));
	cr_assert_not_null(j);
	cr_assert_str_eq(topic, "run.created");
	json_decref(j);
	cr_assert_eq(nng_socket_set_ms(runs, NNG_OPT_RECVTIMEO, 300), 0);
	cr_assert_null(sub_recv(runs, topic, sizeof(topic)),
	               "run.* subscriber got %s", topic);

	/* "type\0" subscription: exactly that type */
	j = sub_recv(exact, topic, sizeof(topic));
	cr_assert_not_null(j);
	cr_assert_str_eq(topic, "instance.succeeded");
	json_decref(j);
	cr_assert_eq(nng_socket_set_ms(exact, NNG_OPT_RECVTIMEO, 300), 0);
	cr_assert_null(sub_recv(exact, topic, sizeof(topic)),
	               "exact subscriber got %s", topic);

	ax_event_emitter_stats_get(em, &s);
	cr_assert_eq(s.pub_on, 1);
	cr_assert_eq(s.pub_published, 4);
	cr_assert_eq(s.pub_dropped, 0);
	cr_assert_eq(s.pub_unheard, 1);
	nng_close(all);
	nng_close(runs);
	nng_close(exact);
	/* every subscriber gone: back to not encoding */
	for (int i = 0; i < 200; i++) {
		send_event("run.created", NULL);
		ax_clock_sleep_us(10000);
		ax_event_emitter_stats_get(em, &s);
		if (s.pub_unheard > 1)
			break;
	}
	cr_assert_gt(s.pub_unheard, 1,
	             "events still encoded with no subscriber left");
	teardown();
}

Test(sinks, pub_address_in_use_leaves_the_sink_off)
{
	nng_socket other;
	char       pub[128];
	snprintf(pub, sizeof(pub), "ipc:///tmp/ax-test-sinks-%d.ipc",
	         (int) getpid());
	cr_assert_eq(nng_sub0_open(&other), 0);
	cr_assert_eq(nng_listen(other, pub, NULL, 0), 0);
	setup("", "10", 0);
	start();
	send_event("run.created", NULL);
	ax_event_emitter_stats s;
	for (int i = 0; i < 200; i++) {
		ax_event_emitter_stats_get(em, &s);
		if (s.events == 1)
			break;
		ax_clock_sleep_us(5000);
	}
	cr_assert_eq(s.events, 1, "the emitter must still handle events");
	cr_assert_eq(s.pub_on, 0);
	nng_close(other);
	teardown();
}

/* ---------------------------------------------------------------------- */
/* OpenLineage */

static int
ol_settled8(const ax_event_emitter_stats *s)
{
	return s->ol_delivered == 8;
}

/* Writes every received body into a JSON array file and validates each
 * against $defs/RunEvent of the kept schema with python3-jsonschema. */
static void
validate_with_schema(void)
{
	char path[128], cmd[1024];
	snprintf(path, sizeof(path), "/tmp/ax-test-sinks-%d.json",
	         (int) getpid());
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs("[", f);
	for (int i = 0; i < rx.nbody; i++)
		fprintf(f, "%s%s", i ? "," : "", rx.body[i]);
	fputs("]", f);
	fclose(f);
	snprintf(
	    cmd, sizeof(cmd),
	    "python3 -c \"import json,sys,jsonschema\n"
	    "s=json.load(open(sys.argv[1]))\n"
	    "s.pop('oneOf',None); s['\\$ref']='#/\\$defs/RunEvent'\n"
	    "v=jsonschema.Draft202012Validator(s,"
	    "format_checker=jsonschema.FormatChecker())\n"
	    "evs=json.load(open(sys.argv[2]))\n"
	    "assert evs, 'no events'\n"
	    "[v.validate(e) for e in evs]\n"
	    "bad={'eventType':'NOPE','eventTime':'x','producer':'p',"
	    "'schemaURL':'u','run':{'runId':'r'},'job':{}}\n"
	    "assert not v.is_valid(bad), 'validator accepts anything'\n"
	    "print(len(evs),'valid')\" %s/tests/openlineage/OpenLineage.json "
	    "%s 1>&2",
	    AX_SOURCE_ROOT, path);
	int rc = system(cmd);
	unlink(path);
	cr_assert_eq(rc, 0,
	             "an OpenLineage event does not validate (see "
	             "stderr)");
}

static json_t *
find_event(const char *type, const char *job)
{
	for (int i = 0; i < rx.nbody; i++) {
		json_t *j = json_loads(rx.body[i], 0, NULL);
		cr_assert_not_null(j, "POST body is not JSON: %s", rx.body[i]);
		json_t *jb = json_object_get(j, "job");
		if (!strcmp(json_string_value(json_object_get(j, "eventType")),
		            type) &&
		    !strcmp(json_string_value(json_object_get(jb, "name")),
		            job))
			return j;
		json_decref(j);
	}
	cr_assert_fail("no %s event for job %s", type, job);
	return NULL;
}

static const char *
jpath(json_t *j, const char *a, const char *b, const char *c, const char *d)
{
	json_t *x = json_object_get(j, a);
	if (b)
		x = json_object_get(x, b);
	if (c)
		x = json_object_get(x, c);
	if (d)
		x = json_object_get(x, d);
	cr_assert(json_is_string(x), "missing %s.%s.%s.%s", a, b ? b : "",
	          c ? c : "", d ? d : "");
	return json_string_value(x);
}

Test(sinks, openlineage_run_events_validate_against_the_schema)
{
	unsigned           port;
	char               url[96];
	struct MHD_Daemon *d = ax_http_rx_start(&rx, &port);

	snprintf(url, sizeof(url), "http://127.0.0.1:%u/api/v1/lineage", port);
	setup(url, "100", 0);
	start();
	send_event("run.created", NULL);          /* START etl */
	send_event("instance.admitted", "load");  /* not mapped */
	send_event("instance.running", "load");   /* START etl.load */
	send_event("instance.succeeded", "load"); /* COMPLETE */
	send_event("instance.failed", "check");   /* FAIL */
	send_event("instance.timeout", "slow");   /* FAIL */
	send_event("instance.canceled", "gone");  /* ABORT */
	send_event("run.succeeded", NULL);        /* COMPLETE etl */
	send_event("run.superseded", NULL);       /* ABORT etl */
	ax_event_emitter_stats s = wait_stats(ol_settled8, 10000000);
	cr_assert_eq(s.ol_delivered, 8, "delivered %llu",
	             (unsigned long long) s.ol_delivered);
	cr_assert_eq(s.ol_mapped, 8, "instance.admitted must not be mapped");
	cr_assert_eq(rx.nbody, 8);
	cr_assert_eq(rx.bad_ctype, 0, "POST without Content-Type JSON");
	validate_with_schema();

	char dag_run[37];
	ax_sink_ol_dag_run_uuid("prod-ax", "etl", 42, dag_run);
	json_t *start_dag = find_event("START", "etl");
	cr_assert_str_eq(jpath(start_dag, "run", "runId", NULL, NULL),
	                 dag_run);
	cr_assert_str_eq(jpath(start_dag, "job", "namespace", NULL, NULL),
	                 "prod-ax");
	cr_assert_str_eq(jpath(start_dag, "schemaURL", NULL, NULL, NULL),
	                 AX_OL_SCHEMA_URL);
	cr_assert_str_eq(jpath(start_dag, "producer", NULL, NULL, NULL),
	                 AX_OL_PRODUCER);
	cr_assert_str_eq(jpath(start_dag, "eventTime", NULL, NULL, NULL),
	                 "2026-01-01T00:00:00.123456Z");
	cr_assert_str_eq(jpath(start_dag, "run", "facets", "nominalTime",
	                       "nominalStartTime"),
	                 "2025-12-31T00:00:00.000000Z");
	cr_assert_null(json_object_get(
	    json_object_get(json_object_get(start_dag, "run"), "facets"),
	    "parent"));
	json_decref(start_dag);

	json_t *start_task = find_event("START", "etl.load");
	cr_assert_str_eq(jpath(start_task, "run", "runId", NULL, NULL),
	                 RUN_ID);
	json_t *par = json_object_get(
	    json_object_get(json_object_get(start_task, "run"), "facets"),
	    "parent");
	cr_assert_str_eq(jpath(par, "run", "runId", NULL, NULL), dag_run);
	cr_assert_str_eq(jpath(par, "job", "name", NULL, NULL), "etl");
	cr_assert_str_eq(jpath(par, "job", "namespace", NULL, NULL),
	                 "prod-ax");
	cr_assert_str_eq(jpath(start_task, "run", "facets", "ax", "eventType"),
	                 "instance.running");
	json_decref(start_task);

	json_decref(find_event("COMPLETE", "etl.load"));
	json_decref(find_event("FAIL", "etl.check"));
	json_decref(find_event("FAIL", "etl.slow"));
	json_decref(find_event("ABORT", "etl.gone"));
	json_t *done = find_event("COMPLETE", "etl");
	cr_assert_str_eq(jpath(done, "run", "runId", NULL, NULL), dag_run,
	                 "every event of a DAG run has the same runId");
	json_decref(done);
	json_decref(find_event("ABORT", "etl"));
	teardown();
	MHD_stop_daemon(d);
}

static int
ol_settled1(const ax_event_emitter_stats *s)
{
	return s->ol_delivered + s->ol_undeliverable + s->ol_rejected >= 1;
}

Test(sinks, openlineage_retries_5xx_then_delivers_once)
{
	unsigned           port;
	char               url[96];
	struct MHD_Daemon *d = ax_http_rx_start(&rx, &port);

	rx.fail_next = 2;
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/", port);
	setup(url, "100", 0);
	start();
	send_event("instance.succeeded", "load");
	ax_event_emitter_stats s = wait_stats(ol_settled1, 10000000);
	cr_assert_eq(s.ol_delivered, 1);
	cr_assert_eq(s.ol_retries, 2);
	cr_assert_eq(s.ol_undeliverable, 0);
	ax_clock_sleep_us(300000); /* a duplicate would arrive now */
	cr_assert_eq(rx.hits, 3, "503, 503, 200: three POSTs");
	cr_assert_eq(ax_http_rx_count(&rx), 1, "delivered exactly once");
	teardown();
	MHD_stop_daemon(d);
}

Test(sinks, openlineage_4xx_is_dropped_without_retry)
{
	unsigned           port;
	char               url[96];
	struct MHD_Daemon *d = ax_http_rx_start(&rx, &port);

	rx.answer = 400;
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/", port);
	setup(url, "100", 0);
	start();
	send_event("instance.succeeded", "load");
	ax_event_emitter_stats s = wait_stats(ol_settled1, 10000000);
	cr_assert_eq(s.ol_rejected, 1);
	cr_assert_eq(s.ol_retries, 0);
	cr_assert_eq(s.ol_delivered, 0);
	ax_clock_sleep_us(300000);
	cr_assert_eq(rx.hits, 1, "a 4xx is not retried");
	teardown();
	MHD_stop_daemon(d);
}

Test(sinks, openlineage_connection_refused_gives_up_after_5_attempts)
{
	unsigned           port;
	char               url[96];
	struct MHD_Daemon *d = ax_http_rx_start(&rx, &port);

	MHD_stop_daemon(d); /* nothing listens there now */
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/", port);
	setup(url, "100", 0);
	start();
	send_event("instance.succeeded", "load");
	ax_event_emitter_stats s = wait_stats(ol_settled1, 10000000);
	cr_assert_eq(s.ol_delivered, 0);
	cr_assert_eq(s.ol_undeliverable, 1);
	cr_assert_eq(s.ol_retries, 4, "5 attempts = 4 retries");
	teardown();
}

/* Stops the actor system (the sinks write their final counters to
 * component_stats) and renders ax-api's sink metrics into *b; returns an
 * open store (ax_store_close it). */
static ax_store *
stop_and_render_sinks(ax_buf *b)
{
	ax_store *st;

	ax_actor_client_free(cli);
	cli = NULL;
	ax_actor_system_free(sys);
	sys = NULL;
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &st), AX_OK);
	cr_assert_eq(ax_api_metrics_render_sinks(st, b), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_not_null(b->p);
	return st;
}

/* /metrics counts n drops of sink for a full buffer. */
static void
assert_buffer_full(const ax_buf *b, const char *sink, uint64_t n)
{
	char want[160];
	snprintf(want, sizeof(want),
	         "ax_event_sink_dropped_total{sink=\"%s\",reason="
	         "\"buffer_full\"} %llu\n",
	         sink, (unsigned long long) n);
	cr_assert_not_null(strstr(b->p, want), "want %s in:\n%s", want, b->p);
}

static int
all50(const ax_event_emitter_stats *s)
{
	/* events counts on arrival; mapped and stored once the sinks ran */
	return s->events == 50 && s->ol_mapped == 50 && s->stored == 50;
}

Test(sinks, openlineage_overflow_drops_counted_never_blocks)
{
	unsigned           port;
	char               url[96];
	struct MHD_Daemon *d = ax_http_rx_start(&rx, &port);
	MHD_stop_daemon(d); /* receiver down: connection refused */
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/", port);
	setup(url, "3", 1);
	start();
	int64_t t0 = ax_clock_mono_us();
	for (int i = 0; i < 50; i++)
		send_event("instance.failed", "load");
	ax_event_emitter_stats s    = wait_stats(all50, 5000000);
	int64_t                took = ax_clock_mono_us() - t0;
	cr_assert_eq(s.events, 50);
	fprintf(stderr,
	        "test_sinks: 50 events handled with the OpenLineage "
	        "receiver down in %.3f ms\n",
	        (double) took / 1000.0);
	cr_assert(took < 500000, "handling blocked: %lld us",
	          (long long) took);
	/* 3 wait in the queue, at most 1 is being retried by the sender */
	cr_assert(s.ol_dropped_full == 46 || s.ol_dropped_full == 47,
	          "dropped %llu (mapped %llu, queued %llu, retries %llu, "
	          "undeliverable %llu)",
	          (unsigned long long) s.ol_dropped_full,
	          (unsigned long long) s.ol_mapped,
	          (unsigned long long) s.ol_queued,
	          (unsigned long long) s.ol_retries,
	          (unsigned long long) s.ol_undeliverable);
	uint64_t full = s.ol_dropped_full;
	cr_assert_eq(s.stored, 50, "event_log still gets every event");

	/* stop: what is queued is undeliverable; counters reach
	 * component_stats and /metrics */
	ax_buf    b  = { 0 };
	ax_store *st = stop_and_render_sinks(&b);
	assert_buffer_full(&b, "openlineage", full);
	cr_assert_not_null(
	    strstr(b.p,
	           "ax_event_sink_dropped_total{sink=\"openlineage\","
	           "reason=\"undeliverable\"} "),
	    "%s", b.p);
	cr_assert_not_null(strstr(b.p,
	                          "ax_event_sink_delivered_total{sink="
	                          "\"event_log\"} 50\n"),
	                   "%s", b.p);
	cr_assert_not_null(
	    strstr(b.p, "# TYPE ax_event_sink_dropped_total counter\n"));
	/* undeliverable = every mapped event not dropped at submit */
	int64_t und = -1;
	cr_assert_eq(ax_store_query_int64(
	                 st,
	                 "SELECT value FROM component_stats WHERE component = "
	                 "'event_sink.openlineage' AND key = "
	                 "'dropped.undeliverable'",
	                 0, NULL, &und),
	             AX_OK);
	cr_assert_eq((uint64_t) und + full, 50, "undeliverable %lld",
	             (long long) und);
	ax_buf_fini(&b);
	ax_store_close(st);
	teardown();
}

/* ---------------------------------------------------------------------- */
/* alerts */

static int
alerts50(const ax_event_emitter_stats *s)
{
	return s->events == 50 && s->alerts.fired == 50 && s->stored == 50;
}

Test(sinks, alerts_dead_alertmanager_drops_oldest_counted_never_blocks)
{
	unsigned           port;
	char               url[96];
	struct MHD_Daemon *d = ax_http_rx_start(&rx, &port);
	MHD_stop_daemon(d); /* Alertmanager down: connection refused */
	snprintf(url, sizeof(url), "http://127.0.0.1:%u", port);
	alert_am = url;
	setup("", "3", 1);
	start();
	int64_t t0 = ax_clock_mono_us();
	for (int i = 0; i < 50; i++)
		send_event("instance.failed", "load"); /* no registry: final */
	ax_event_emitter_stats s    = wait_stats(alerts50, 5000000);
	int64_t                took = ax_clock_mono_us() - t0;
	cr_assert(s.alert_on && s.alerts.am_on);
	cr_assert_eq(s.alerts.fired, 50, "fired %llu",
	             (unsigned long long) s.alerts.fired);
	fprintf(stderr,
	        "test_sinks: 50 alerts handled with Alertmanager down in "
	        "%.3f ms\n",
	        (double) took / 1000.0);
	cr_assert(took < 500000, "handling blocked: %lld us",
	          (long long) took);
	/* every push is accepted (the oldest make room): 3 wait in the
	 * queue, at most 1 is being retried by the sender */
	cr_assert_eq(s.alerts.am.pushed, 50);
	cr_assert(s.alerts.am.dropped_full == 46 ||
	              s.alerts.am.dropped_full == 47,
	          "dropped %llu (queued %llu)",
	          (unsigned long long) s.alerts.am.dropped_full,
	          (unsigned long long) s.alerts.am.queued);
	uint64_t full = s.alerts.am.dropped_full;
	cr_assert_eq(s.stored, 50, "event_log still gets every event");

	ax_buf    b  = { 0 };
	ax_store *st = stop_and_render_sinks(&b);
	assert_buffer_full(&b, "alertmanager", full);
	ax_buf_fini(&b);
	ax_store_close(st);
	teardown();
}
