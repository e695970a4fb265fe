/*
 * test_worker_proto.c - unit tests of the worker protocol checks
 * (engine/worker_proto.c): each message a worker or a queue may send,
 * well formed and with each kind of bad field, and the detail that names
 * the field.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "resources.h"
#include "worker_proto.h"

#define RUN1 "01890000-0000-7000-8000-0000000000a1"

/* Packs m and runs the queue side's decode; returns its error. */
static ax_err
worker_side(const Ax__WorkerMessage *m)
{
	size_t             n = ax__worker_message__get_packed_size(m);
	uint8_t           *b = malloc(n + 1);
	Ax__WorkerMessage *out;
	ax_err             rv;

	ax__worker_message__pack(m, b);
	rv = ax_wproto_worker_msg(b, n, &out);
	cr_assert_eq(out == NULL, rv != AX_OK);
	if (out != NULL)
		ax__worker_message__free_unpacked(out, NULL);
	free(b);
	return rv;
}

static ax_err
queue_side(const Ax__QueueMessage *m)
{
	size_t            n = ax__queue_message__get_packed_size(m);
	uint8_t          *b = malloc(n + 1);
	Ax__QueueMessage *out;
	ax_err            rv;

	ax__queue_message__pack(m, b);
	rv = ax_wproto_queue_msg(b, n, &out);
	cr_assert_eq(out == NULL, rv != AX_OK);
	if (out != NULL)
		ax__queue_message__free_unpacked(out, NULL);
	free(b);
	return rv;
}

static void
refused(ax_err rv, const char *field)
{
	cr_expect_eq(rv, AX_EPROTO, "want a refusal naming %s", field);
	cr_expect(strstr(ax_err_detail(), field) != NULL, "'%s' in '%s'",
	          field, ax_err_detail());
}

Test(worker_proto, register_needs_an_id_and_sane_slots)
{
	Ax__WorkerMessage m   = AX__WORKER_MESSAGE__INIT;
	Ax__Register      r   = AX__REGISTER__INIT;
	char             *run = RUN1, *bad = "../x";
	char              long_id[300];

	m.body_case         = AX__WORKER_MESSAGE__BODY_REGISTER;
	m.register_         = &r;
	r.worker_id         = "w1";
	r.worker_group      = "default";
	r.hostname          = "host";
	r.slots             = 8;
	r.pid               = 77;
	r.n_running_run_ids = 1;
	r.running_run_ids   = &run;
	cr_expect_eq(worker_side(&m), AX_OK, "%s", ax_err_detail());
	r.slots = -3;
	refused(worker_side(&m), "Register.slots is -3");
	r.slots = 100001;
	refused(worker_side(&m), "Register.slots");
	r.slots     = 8;
	r.worker_id = "";
	refused(worker_side(&m), "Register.worker_id is empty");
	memset(long_id, 'w', sizeof(long_id) - 1);
	long_id[sizeof(long_id) - 1] = '\0';
	r.worker_id                  = long_id;
	refused(worker_side(&m), "Register.worker_id");
	r.worker_id = "w1";
	r.hostname  = "host\nX-Injected: 1";
	refused(worker_side(&m), "Register.hostname");
	r.hostname        = "host";
	r.running_run_ids = &bad;
	refused(worker_side(&m), "Register.running_run_ids");
	r.running_run_ids = &run;
	r.pid             = -1;
	refused(worker_side(&m), "Register.pid");
	r.pid      = 77;
	r.prefetch = -1;
	refused(worker_side(&m), "Register.prefetch is -1");
	r.prefetch = 64;
	cr_expect_eq(worker_side(&m), AX_OK, "%s", ax_err_detail());

	/* named resources: valid names, whole positive amounts, at most
	 * AX_RES_MAX */
	Ax__Register__ResourcesEntry  e[AX_RES_MAX + 1];
	Ax__Register__ResourcesEntry *ep[AX_RES_MAX + 1];
	for (int i = 0; i <= AX_RES_MAX; i++) {
		Ax__Register__ResourcesEntry z =
		    AX__REGISTER__RESOURCES_ENTRY__INIT;
		e[i]       = z;
		e[i].key   = "gpu";
		e[i].value = 2;
		ep[i]      = &e[i];
	}
	r.n_resources = 1;
	r.resources   = ep;
	cr_expect_eq(worker_side(&m), AX_OK, "%s", ax_err_detail());
	e[0].value = 0;
	refused(worker_side(&m), "Register.resources value is 0");
	e[0].value = 2;
	e[0].key   = "g\npu";
	refused(worker_side(&m), "Register.resources key");
	e[0].key = "cpu";
	refused(worker_side(&m), "Register.resources key 'cpu'");
	e[0].key      = "gpu";
	r.n_resources = AX_RES_MAX + 1;
	refused(worker_side(&m), "Register.resources is 17");
}

Test(worker_proto, reports_need_run_ids)
{
	Ax__WorkerMessage m   = AX__WORKER_MESSAGE__INIT;
	Ax__Started       s   = AX__STARTED__INIT;
	Ax__Result        r   = AX__RESULT__INIT;
	Ax__Report        rep = AX__REPORT__INIT;
	Ax__Started      *sp  = &s;
	Ax__Result       *rp  = &r;
	char              run[200];

	m.worker_id = "w1";
	m.body_case = AX__WORKER_MESSAGE__BODY_STARTED;
	m.started   = &s;
	s.run_id    = RUN1;
	cr_expect_eq(worker_side(&m), AX_OK, "%s", ax_err_detail());
	s.run_id = "";
	refused(worker_side(&m), "Started.run_id");
	memset(run, 'a', sizeof(run) - 1);
	run[sizeof(run) - 1] = '\0';
	s.run_id             = run;
	refused(worker_side(&m), "Started.run_id");
	m.body_case = AX__WORKER_MESSAGE__BODY_RESULT;
	m.result    = &r;
	r.run_id    = "../../etc/passwd";
	refused(worker_side(&m), "Result.run_id");
	r.run_id     = RUN1;
	r.max_rss_kb = -5;
	refused(worker_side(&m), "Result.max_rss_kb");
	r.max_rss_kb  = 0;
	s.run_id      = RUN1;
	m.body_case   = AX__WORKER_MESSAGE__BODY_REPORT;
	m.report      = &rep;
	rep.n_started = 1;
	rep.started   = &sp;
	rep.n_results = 1;
	rep.results   = &rp;
	cr_expect_eq(worker_side(&m), AX_OK, "%s", ax_err_detail());
	r.run_id = "";
	refused(worker_side(&m), "Result.run_id");
	/* the dispatches a worker gives back (HeartbeatReply.withdraw) */
	char *back[2]           = { RUN1, "x;rm -rf /" };
	r.run_id                = RUN1;
	rep.n_withdrawn_run_ids = 1;
	rep.withdrawn_run_ids   = back;
	cr_expect_eq(worker_side(&m), AX_OK, "%s", ax_err_detail());
	rep.n_withdrawn_run_ids = 2;
	refused(worker_side(&m), "Report.withdrawn_run_ids");
}

Test(worker_proto, pull_and_heartbeat_ranges)
{
	Ax__WorkerMessage m     = AX__WORKER_MESSAGE__INIT;
	Ax__Pull          p     = AX__PULL__INIT;
	Ax__Heartbeat     hb    = AX__HEARTBEAT__INIT;
	Ax__Ack           ak    = AX__ACK__INIT;
	char             *empty = "";

	m.worker_id  = "w1";
	m.body_case  = AX__WORKER_MESSAGE__BODY_PULL;
	m.pull       = &p;
	p.free_slots = 4;
	p.wait_ms    = 1000;
	cr_expect_eq(worker_side(&m), AX_OK, "%s", ax_err_detail());
	p.free_slots = INT32_MIN;
	refused(worker_side(&m), "Pull.free_slots is -2147483648");
	p.free_slots = 4;
	p.wait_ms    = -1;
	refused(worker_side(&m), "Pull.wait_ms");
	p.wait_ms          = 0;
	m.ack              = &ak;
	ak.n_acked_run_ids = 1;
	ak.acked_run_ids   = &empty;
	refused(worker_side(&m), "acked_run_ids");
	m.ack          = NULL;
	m.body_case    = AX__WORKER_MESSAGE__BODY_HEARTBEAT;
	m.heartbeat    = &hb;
	hb.slots_total = 8;
	hb.slots_free  = -1; /* a worker over its slots says so */
	cr_expect_eq(worker_side(&m), AX_OK, "%s", ax_err_detail());
	/* the live usage: in range, and a run id per task */
	Ax__TaskUsage tu = AX__TASK_USAGE__INIT, *tup = &tu;
	hb.cpus         = 8;
	hb.mem_total_kb = 1000;
	hb.n_tasks      = 1;
	hb.tasks        = &tup;
	tu.run_id       = "01900000-0000-7000-8000-000000000001";
	tu.cpu_milli    = 1500;
	tu.rss_kb       = 20;
	cr_expect_eq(worker_side(&m), AX_OK, "%s", ax_err_detail());
	tu.cpu_milli = -1;
	refused(worker_side(&m), "Heartbeat.tasks cpu_milli");
	tu.cpu_milli = 0;
	tu.run_id    = "";
	refused(worker_side(&m), "Heartbeat.tasks run_id");
	tu.run_id       = "01900000-0000-7000-8000-000000000001";
	hb.mem_total_kb = -5;
	refused(worker_side(&m), "Heartbeat.mem_total_kb");
	hb.mem_total_kb = 1000;
	hb.load_x100    = -7;
	refused(worker_side(&m), "Heartbeat.load_x100");
	m.worker_id = "w\x01";
	refused(worker_side(&m), "WorkerMessage.worker_id");
}

Test(worker_proto, garbage_and_unknown_bodies)
{
	static const uint8_t junk[] = { 0xff, 0xff, 0xff, 0xff };
	Ax__WorkerMessage   *w;
	Ax__QueueMessage    *q;

	refused(ax_wproto_worker_msg(junk, sizeof(junk), &w),
	        "not an ax.WorkerMessage");
	cr_expect_null(w);
	refused(ax_wproto_queue_msg(junk, sizeof(junk), &q),
	        "not an ax.QueueMessage");
	cr_expect_null(q);
	/* no body: accepted here, answered as unsupported by the queue */
	cr_expect_eq(ax_wproto_worker_msg("", 0, &w), AX_OK);
	cr_expect_eq(w->body_case, AX__WORKER_MESSAGE__BODY__NOT_SET);
	ax__worker_message__free_unpacked(w, NULL);
}

Test(worker_proto, register_reply_intervals)
{
	Ax__QueueMessage  m = AX__QUEUE_MESSAGE__INIT;
	Ax__RegisterReply r = AX__REGISTER_REPLY__INIT;

	m.body_case             = AX__QUEUE_MESSAGE__BODY_REGISTER_REPLY;
	m.register_reply        = &r;
	r.session               = 9;
	r.heartbeat_interval_ms = 2000;
	r.lease_ttl_ms          = 10000;
	cr_expect_eq(queue_side(&m), AX_OK, "%s", ax_err_detail());
	r.lease_ttl_ms = -5;
	refused(queue_side(&m), "RegisterReply.lease_ttl_ms");
	r.lease_ttl_ms          = 10000;
	r.heartbeat_interval_ms = 0;
	refused(queue_side(&m), "RegisterReply.heartbeat_interval_ms");
	r.heartbeat_interval_ms = 2000;
	r.session               = 0;
	refused(queue_side(&m), "RegisterReply.session");
}

Test(worker_proto, heartbeat_reply_kill_graces)
{
	Ax__QueueMessage   m        = AX__QUEUE_MESSAGE__INIT;
	Ax__HeartbeatReply h        = AX__HEARTBEAT_REPLY__INIT;
	char              *ids[1]   = { RUN1 };
	int64_t            grace[2] = { 1000, 5 };

	m.body_case         = AX__QUEUE_MESSAGE__BODY_HEARTBEAT_REPLY;
	m.heartbeat_reply   = &h;
	h.n_cancel_run_ids  = 1;
	h.cancel_run_ids    = ids;
	h.n_cancel_grace_ms = 1;
	h.cancel_grace_ms   = grace;
	cr_expect_eq(queue_side(&m), AX_OK, "%s", ax_err_detail());
	h.n_cancel_grace_ms = 2; /* more graces than kills */
	refused(queue_side(&m), "HeartbeatReply.cancel_grace_ms is 2");
	h.n_cancel_grace_ms = 1;
	grace[0]            = -1;
	refused(queue_side(&m), "HeartbeatReply.cancel_grace_ms is -1");
	grace[0]             = 5;
	char *back[1]        = { "../../etc/passwd" };
	h.n_withdraw_run_ids = 1;
	h.withdraw_run_ids   = back;
	refused(queue_side(&m), "HeartbeatReply.withdraw_run_ids");
	back[0] = RUN1;
	cr_expect_eq(queue_side(&m), AX_OK, "%s", ax_err_detail());
}

static Ax__Dispatch
good_dispatch(void)
{
	Ax__Dispatch d = AX__DISPATCH__INIT;

	d.run_id          = RUN1;
	d.dag             = "demo.chain";
	d.task            = "a";
	d.attempt         = 1;
	d.task_type       = "bash";
	d.command         = "echo hi";
	d.timeout_ms      = 60000;
	d.logical_time_us = 1714530600000000;
	d.slots           = 1;
	return d;
}

Test(worker_proto, dispatch_fields_a_worker_relies_on)
{
	Ax__Dispatch            d  = good_dispatch();
	Ax__Dispatch__EnvEntry  e  = AX__DISPATCH__ENV_ENTRY__INIT;
	Ax__Dispatch__EnvEntry *ep = &e;
	Ax__Rlimits             rl = AX__RLIMITS__INIT;

	cr_expect_eq(ax_wproto_dispatch(&d), AX_OK, "%s", ax_err_detail());
	d.timeout_ms = INT64_MAX; /* * 1000 would overflow */
	refused(ax_wproto_dispatch(&d), "Dispatch.timeout_ms");
	d               = good_dispatch();
	d.kill_grace_ms = -1;
	refused(ax_wproto_dispatch(&d), "Dispatch.kill_grace_ms");
	d                 = good_dispatch();
	d.logical_time_us = INT64_MIN; /* no calendar date */
	refused(ax_wproto_dispatch(&d), "Dispatch.logical_time_us");
	d     = good_dispatch();
	d.dag = "../../etc";
	refused(ax_wproto_dispatch(&d), "Dispatch.dag");
	d      = good_dispatch();
	d.task = "x/y";
	refused(ax_wproto_dispatch(&d), "Dispatch.task");
	d        = good_dispatch();
	d.run_id = "";
	refused(ax_wproto_dispatch(&d), "Dispatch.run_id");
	d             = good_dispatch();
	d.shard_total = 4;
	d.shard_index = 4;
	refused(ax_wproto_dispatch(&d), "Dispatch.shard_index");
	d       = good_dispatch();
	d.slots = -2;
	refused(ax_wproto_dispatch(&d), "Dispatch.slots");
	d       = good_dispatch();
	e.key   = "LD_PRELOAD=/tmp/x.so PATH";
	e.value = "y";
	d.n_env = 1;
	d.env   = &ep;
	refused(ax_wproto_dispatch(&d), "Dispatch.env");
	e.key = "REGION";
	cr_expect_eq(ax_wproto_dispatch(&d), AX_OK, "%s", ax_err_detail());
	d.rlimits     = &rl;
	rl.open_files = -1;
	refused(ax_wproto_dispatch(&d), "Rlimits.open_files");
}

Test(worker_proto, run_ids)
{
	cr_expect(ax_wproto_run_id_ok(RUN1));
	cr_expect(ax_wproto_run_id_ok("r-bash"));
	cr_expect(!ax_wproto_run_id_ok(""));
	cr_expect(!ax_wproto_run_id_ok(".."));
	cr_expect(!ax_wproto_run_id_ok("a/b"));
	cr_expect(!ax_wproto_run_id_ok("a b"));
	cr_expect(!ax_wproto_run_id_ok(NULL));
}
