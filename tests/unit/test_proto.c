/*
 * test_proto.c - the protobuf messages of proto/ round-trip through
 * protobuf-c (every Command and worker-protocol body, events, batches),
 * and malformed bytes are refused (NULL) without crashing.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>

#include "commands.pb-c.h"
#include "events.pb-c.h"
#include "worker.pb-c.h"

/* Packs m, unpacks it with desc, repacks: the bytes must be equal. */
static ProtobufCMessage *
round_trip(const ProtobufCMessage *m)
{
	size_t            n = protobuf_c_message_get_packed_size(m);
	uint8_t          *a = malloc(n + 1), *b = malloc(n + 1);
	ProtobufCMessage *u;

	cr_assert_eq(protobuf_c_message_pack(m, a), n);
	u = protobuf_c_message_unpack(m->descriptor, NULL, n, a);
	cr_assert_not_null(u, "%s did not unpack", m->descriptor->name);
	cr_assert_eq(protobuf_c_message_get_packed_size(u), n);
	protobuf_c_message_pack(u, b);
	cr_assert_eq(memcmp(a, b, n), 0, "%s changed in a round trip",
	             m->descriptor->name);
	free(a);
	free(b);
	return u;
}

Test(proto, event_and_batch_round_trip)
{
	Ax__Event      e = AX__EVENT__INIT;
	Ax__Event     *ev[2];
	Ax__EventBatch b = AX__EVENT_BATCH__INIT;
	e.id             = "8d3f2d8e-2f7c-4b0a-9a53-0c5b9c1d2e3f";
	e.type           = "instance.ready";
	e.time_us        = 1764496472123456LL;
	e.dag            = "etl_daily";
	e.dag_run_id     = 12;
	e.task           = "extract";
	e.instance_id    = 99;
	e.run_id         = "0f0e0d0c-0000-4000-8000-000000000001";
	e.attempt        = 2;
	e.trace_id       = "0123456789abcdef0123456789abcdef";
	e.reason         = "WAIT_DEPENDENCY";
	e.source         = "dependency_detector";
	e.shard_index    = 3;
	e.shard_total    = 8;
	e.payload_json   = "{\"from\":\"PENDING\",\"to\":\"READY\"}";
	ev[0] = ev[1] = &e;
	b.n_events    = 2;
	b.events      = ev;

	Ax__EventBatch *u = (Ax__EventBatch *) round_trip(&b.base);
	cr_assert_eq(u->n_events, 2);
	cr_assert_str_eq(u->events[1]->reason, "WAIT_DEPENDENCY");
	cr_assert_eq(u->events[1]->time_us, 1764496472123456LL);
	cr_assert_eq(u->events[0]->shard_total, 8);
	protobuf_c_message_free_unpacked(&u->base, NULL);
}

Test(proto, every_command_body_round_trips)
{
	Ax__InstanceRef               ref = AX__INSTANCE_REF__INIT;
	Ax__ScheduleArmed             sa  = AX__SCHEDULE_ARMED__INIT;
	Ax__ScheduleDisarmed          sd  = AX__SCHEDULE_DISARMED__INIT;
	Ax__Due                       due = AX__DUE__INIT;
	Ax__InstanceReady             rdy = AX__INSTANCE_READY__INIT;
	Ax__Admission                 adm = AX__ADMISSION__INIT;
	Ax__AttemptCreated            ac  = AX__ATTEMPT_CREATED__INIT;
	Ax__AttemptRendered           ar  = AX__ATTEMPT_RENDERED__INIT;
	Ax__AttemptResult             res = AX__ATTEMPT_RESULT__INIT;
	Ax__TimerSet                  ts  = AX__TIMER_SET__INIT;
	Ax__TimerCancel               tc  = AX__TIMER_CANCEL__INIT;
	Ax__TimerFired                tf  = AX__TIMER_FIRED__INIT;
	Ax__InstanceSucceeded         is  = AX__INSTANCE_SUCCEEDED__INIT;
	Ax__RunCompleted              rc  = AX__RUN_COMPLETED__INIT;
	Ax__WorkerCapacity            wc  = AX__WORKER_CAPACITY__INIT;
	Ax__CancelInstance            ci  = AX__CANCEL_INSTANCE__INIT;
	Ax__AttemptRendered__EnvEntry env =
	    AX__ATTEMPT_RENDERED__ENV_ENTRY__INIT;
	Ax__AttemptRendered__EnvEntry *envs[1] = { &env };
	Ax__Command                    cmds[15];
	Ax__Command                   *cp[15];
	Ax__CommandBatch               batch = AX__COMMAND_BATCH__INIT;

	ref.dag             = "etl";
	ref.task            = "load";
	ref.instance_id     = 7;
	ref.logical_time_us = 1000;
	sa.schedule_id      = 1;
	sa.cron             = "*/5 * * * * *";
	sa.timezone         = "Europe/Paris";
	sa.catchup          = 1;
	sd.schedule_id      = 1;
	sd.reason           = "SUPERSEDED";
	due.dag             = "etl";
	due.due_at_us       = 5;
	rdy.instance        = &ref;
	rdy.channel         = "P0";
	rdy.priority        = 9;
	adm.instance        = &ref;
	adm.decision        = AX__ADMISSION_DECISION__DELAY;
	adm.reason          = "BACKPRESSURE_DELAYED";
	adm.ready           = &rdy;
	ac.instance         = &ref;
	ac.run_id           = "r1";
	ac.attempt          = 1;
	env.key             = "AX_RUN_ID";
	env.value           = "r1";
	ar.instance         = &ref;
	ar.command          = "echo hi";
	ar.n_env            = 1;
	ar.env              = envs;
	ar.timeout_us       = 30000000;
	res.run_id          = "r1";
	res.status          = AX__ATTEMPT_STATUS__ATTEMPT_TIMEOUT;
	res.term_signal     = 9;
	ts.kind             = AX__TIMER_KIND__TIMER_RETRY;
	ts.key              = "r1";
	ts.fire_at_us       = 77;
	tc.kind             = AX__TIMER_KIND__TIMER_TIMEOUT;
	tc.key              = "r1";
	tf.kind             = AX__TIMER_KIND__TIMER_DELAY;
	tf.fired_at_us      = 78;
	is.instance         = &ref;
	rc.state            = "SUCCESS";
	wc.worker_id        = "w1";
	wc.slots_free       = 3;
	wc.alive            = 1;
	ci.reason           = "MANUAL_CLEAR";

	struct {
		Ax__Command__BodyCase c;
		void                 *p;
	} bodies[15] = {
		{ AX__COMMAND__BODY_SCHEDULE_ARMED, &sa },
		{ AX__COMMAND__BODY_SCHEDULE_DISARMED, &sd },
		{ AX__COMMAND__BODY_DUE, &due },
		{ AX__COMMAND__BODY_INSTANCE_READY, &rdy },
		{ AX__COMMAND__BODY_ADMISSION, &adm },
		{ AX__COMMAND__BODY_ATTEMPT_CREATED, &ac },
		{ AX__COMMAND__BODY_ATTEMPT_RENDERED, &ar },
		{ AX__COMMAND__BODY_RESULT, &res },
		{ AX__COMMAND__BODY_TIMER_SET, &ts },
		{ AX__COMMAND__BODY_TIMER_CANCEL, &tc },
		{ AX__COMMAND__BODY_TIMER_FIRED, &tf },
		{ AX__COMMAND__BODY_INSTANCE_SUCCEEDED, &is },
		{ AX__COMMAND__BODY_RUN_COMPLETED, &rc },
		{ AX__COMMAND__BODY_WORKER_CAPACITY, &wc },
		{ AX__COMMAND__BODY_CANCEL_INSTANCE, &ci },
	};
	for (int i = 0; i < 15; i++) {
		ax__command__init(&cmds[i]);
		cmds[i].trace_id  = "0123456789abcdef0123456789abcdef";
		cmds[i].body_case = bodies[i].c;
		/* Every oneof member shares the union's storage. */
		cmds[i].schedule_armed = bodies[i].p;
		cp[i]                  = &cmds[i];
		Ax__Command *u = (Ax__Command *) round_trip(&cmds[i].base);
		cr_assert_eq(u->body_case, bodies[i].c, "body %d", i);
		cr_assert_not_null(u->schedule_armed);
		protobuf_c_message_free_unpacked(&u->base, NULL);
	}
	batch.n_commands     = 15;
	batch.commands       = cp;
	Ax__CommandBatch *ub = (Ax__CommandBatch *) round_trip(&batch.base);
	cr_assert_eq(ub->n_commands, 15);
	cr_assert_str_eq(ub->commands[4]->admission->reason,
	                 "BACKPRESSURE_DELAYED");
	cr_assert_eq(ub->commands[4]->admission->decision,
	             AX__ADMISSION_DECISION__DELAY);
	cr_assert_str_eq(ub->commands[6]->attempt_rendered->env[0]->key,
	                 "AX_RUN_ID");
	cr_assert_eq(ub->commands[7]->result->status,
	             AX__ATTEMPT_STATUS__ATTEMPT_TIMEOUT);
	protobuf_c_message_free_unpacked(&ub->base, NULL);
}

Test(proto, every_worker_message_round_trips)
{
	Ax__Register   reg        = AX__REGISTER__INIT;
	Ax__Pull       pul        = AX__PULL__INIT;
	Ax__Heartbeat  hb         = AX__HEARTBEAT__INIT;
	Ax__Started    st         = AX__STARTED__INIT;
	Ax__Result     rs         = AX__RESULT__INIT;
	Ax__Deregister dr         = AX__DEREGISTER__INIT;
	Ax__Ack        ack        = AX__ACK__INIT;
	char          *running[2] = { "r1", "r2" };

	reg.worker_id        = "w1";
	reg.worker_group     = "default";
	reg.slots            = 4;
	pul.free_slots       = 3;
	pul.wait_ms          = 30000;
	hb.n_running_run_ids = 2;
	hb.running_run_ids   = running;
	hb.slots_free        = 2;
	st.run_id            = "r1";
	st.pid               = 4242;
	rs.run_id            = "r1";
	rs.status            = 2;
	rs.exit_code         = 3;
	dr.hand_back         = 1;
	ack.acked_queue_seq  = 17;

	struct {
		Ax__WorkerMessage__BodyCase c;
		void                       *p;
	} bodies[] = {
		{ AX__WORKER_MESSAGE__BODY_REGISTER, &reg },
		{ AX__WORKER_MESSAGE__BODY_PULL, &pul },
		{ AX__WORKER_MESSAGE__BODY_HEARTBEAT, &hb },
		{ AX__WORKER_MESSAGE__BODY_STARTED, &st },
		{ AX__WORKER_MESSAGE__BODY_RESULT, &rs },
		{ AX__WORKER_MESSAGE__BODY_DEREGISTER, &dr },
		{ AX__WORKER_MESSAGE__BODY_ACK_ONLY, &ack },
	};
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		Ax__WorkerMessage m = AX__WORKER_MESSAGE__INIT;
		m.worker_id         = "w1";
		m.session           = 5;
		m.seq               = 100 + i;
		m.ack               = &ack;
		m.body_case         = bodies[i].c;
		m.register_         = bodies[i].p;
		Ax__WorkerMessage *u =
		    (Ax__WorkerMessage *) round_trip(&m.base);
		cr_assert_eq(u->body_case, bodies[i].c);
		cr_assert_eq(u->seq, 100 + i);
		cr_assert_eq(u->ack->acked_queue_seq, 17);
		protobuf_c_message_free_unpacked(&u->base, NULL);
	}

	Ax__RegisterReply  rr    = AX__REGISTER_REPLY__INIT;
	Ax__Dispatch       d     = AX__DISPATCH__INIT;
	Ax__Dispatch      *dp[1] = { &d };
	Ax__DispatchBatch  db    = AX__DISPATCH_BATCH__INIT;
	Ax__HeartbeatReply hr    = AX__HEARTBEAT_REPLY__INIT;
	Ax__Error          err   = AX__ERROR__INIT;
	Ax__Rlimits        rl    = AX__RLIMITS__INIT;

	rr.session             = 5;
	rr.lease_ttl_ms        = 15000;
	d.queue_seq            = 9;
	d.run_id               = "r1";
	d.command              = "sleep 1";
	d.timeout_ms           = 1000;
	d.rlimits              = &rl;
	rl.open_files          = 1024;
	db.n_dispatches        = 1;
	db.dispatches          = dp;
	hr.lease_expires_at_us = 123;
	err.code               = "STALE_SESSION";
	struct {
		Ax__QueueMessage__BodyCase c;
		void                      *p;
	} qb[] = {
		{ AX__QUEUE_MESSAGE__BODY_REGISTER_REPLY, &rr },
		{ AX__QUEUE_MESSAGE__BODY_DISPATCH, &db },
		{ AX__QUEUE_MESSAGE__BODY_ACK, &ack },
		{ AX__QUEUE_MESSAGE__BODY_HEARTBEAT_REPLY, &hr },
		{ AX__QUEUE_MESSAGE__BODY_ERROR, &err },
	};
	for (size_t i = 0; i < sizeof(qb) / sizeof(qb[0]); i++) {
		Ax__QueueMessage m  = AX__QUEUE_MESSAGE__INIT;
		m.reply_to_seq      = 100 + i;
		m.body_case         = qb[i].c;
		m.register_reply    = qb[i].p;
		Ax__QueueMessage *u = (Ax__QueueMessage *) round_trip(&m.base);
		cr_assert_eq(u->body_case, qb[i].c);
		if (u->body_case == AX__QUEUE_MESSAGE__BODY_DISPATCH) {
			cr_assert_eq(u->dispatch->n_dispatches, 1);
			cr_assert_eq(
			    u->dispatch->dispatches[0]->rlimits->open_files,
			    1024);
		}
		protobuf_c_message_free_unpacked(&u->base, NULL);
	}
}

struct bad_case {
	uint8_t bytes[16];
	size_t  len;
};

ParameterizedTestParameters(proto, malformed_bytes_are_refused)
{
	static struct bad_case cases[] = {
		/* field 1 (string) with length 10 but 2 bytes follow */
		{ { 0x0a, 0x0a, 'a', 'b' }, 4 },
		/* truncated varint (continuation bit, then end) */
		{ { 0x18, 0x80 }, 2 },
		/* varint longer than 10 bytes */
		{ { 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		    0xff, 0xff, 0x01 },
		  13 },
		/* field number 0 is illegal */
		{ { 0x00, 0x01 }, 2 },
		/* wire type 7 does not exist */
		{ { 0x0f, 0x01 }, 2 },
		/* known string field sent as fixed64, truncated */
		{ { 0x09, 0x01, 0x02 }, 3 },
		/* submessage length past end */
		{ { 0x52, 0x7f, 0x08 }, 3 },
	};
	return cr_make_param_array(struct bad_case, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct bad_case *c, proto, malformed_bytes_are_refused)
{
	cr_assert_null(ax__command__unpack(NULL, c->len, c->bytes));
	cr_assert_null(ax__worker_message__unpack(NULL, c->len, c->bytes));
	cr_assert_null(ax__event__unpack(NULL, c->len, c->bytes));
}

Test(proto, random_bytes_never_crash)
{
	uint8_t  buf[256];
	uint32_t x = 12345;
	for (int round = 0; round < 20000; round++) {
		size_t len = (size_t) (round % 256);
		for (size_t i = 0; i < len; i++) {
			x      = x * 1103515245u + 12345u;
			buf[i] = (uint8_t) (x >> 16);
		}
		ProtobufCMessage *m[3] = {
			(ProtobufCMessage *) ax__command__unpack(NULL, len,
			                                         buf),
			(ProtobufCMessage *) ax__worker_message__unpack(
			    NULL, len, buf),
			(ProtobufCMessage *) ax__queue_message__unpack(
			    NULL, len, buf),
		};
		for (int k = 0; k < 3; k++)
			if (m[k] != NULL)
				protobuf_c_message_free_unpacked(m[k], NULL);
	}
}
