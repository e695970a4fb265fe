/*
 * fuzz_worker_proto.c - libFuzzer target for the worker protocol as both
 * ends decode it (engine/worker_proto.c): what the queue service accepts
 * from a worker over ipc:// or tcp:// (ax_wproto_worker_msg) and what a
 * worker accepts from the queue service (ax_wproto_queue_msg, then
 * ax_wproto_dispatch per dispatch), the functions
 * actors/queue/queue_endpoint.c and worker/worker_client.c call on every
 * message they receive.
 *
 * Input: the first byte picks the direction (even: worker -> queue, odd:
 * queue -> worker), the rest is the packed message. An accepted message
 * is checked against what the handlers then rely on: counts, slots and
 * intervals in range, run_ids usable as path components and map keys,
 * dispatch timeouts that convert to microseconds, env names without '=',
 * a logical time that formats; the conversions the worker does are done
 * here too, so UBSan sees any overflow the checks let through. A refused
 * one must say why (AX_EPROTO with a detail). Never a crash, a leak or
 * UB.
 *
 * Run: build with the `fuzz` feature (clang), then
 *   build/tests/fuzz/fuzz_worker_proto -max_total_time=20 \
 *       tests/fuzz/corpus_worker_proto
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ax_err.h"
#include "clock.h"
#include "worker_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_run_ids(char **v, size_t n)
{
	if (n > AX_WPROTO_LIST_MAX)
		__builtin_trap();
	for (size_t i = 0; i < n; i++)
		if (!ax_wproto_run_id_ok(v[i]) || strchr(v[i], '/') != NULL)
			__builtin_trap();
}

static void
check_worker(const Ax__WorkerMessage *m)
{
	if (m->ack != NULL)
		check_run_ids(m->ack->acked_run_ids, m->ack->n_acked_run_ids);
	switch (m->body_case) {
	case AX__WORKER_MESSAGE__BODY_REGISTER:
		if (m->register_->slots < 1 ||
		    m->register_->slots > AX_WPROTO_SLOTS_MAX ||
		    m->register_->worker_id[0] == '\0')
			__builtin_trap();
		check_run_ids(m->register_->running_run_ids,
		              m->register_->n_running_run_ids);
		break;
	case AX__WORKER_MESSAGE__BODY_PULL: {
		/* the queue's routing computes pull_free - quota */
		int32_t f = m->pull->free_slots;
		if (f < 0 || f > AX_WPROTO_SLOTS_MAX || m->pull->wait_ms < 0)
			__builtin_trap();
		break;
	}
	case AX__WORKER_MESSAGE__BODY_HEARTBEAT:
		check_run_ids(m->heartbeat->running_run_ids,
		              m->heartbeat->n_running_run_ids);
		break;
	case AX__WORKER_MESSAGE__BODY_STARTED:
		if (!ax_wproto_run_id_ok(m->started->run_id))
			__builtin_trap();
		break;
	case AX__WORKER_MESSAGE__BODY_RESULT:
		if (!ax_wproto_run_id_ok(m->result->run_id))
			__builtin_trap();
		break;
	case AX__WORKER_MESSAGE__BODY_REPORT:
		for (size_t i = 0; i < m->report->n_started; i++)
			if (!ax_wproto_run_id_ok(
			        m->report->started[i]->run_id))
				__builtin_trap();
		for (size_t i = 0; i < m->report->n_results; i++)
			if (!ax_wproto_run_id_ok(
			        m->report->results[i]->run_id))
				__builtin_trap();
		break;
	default:
		break;
	}
}

/* What worker_client.c's start_one() computes from an accepted
 * dispatch. */
static void
use_dispatch(const Ax__Dispatch *d)
{
	char             path[2048], logical[40], *kv = NULL;
	volatile int64_t us;

	if (!ax_wproto_run_id_ok(d->run_id) || d->shard_index < 0 ||
	    (d->shard_total > 1 && d->shard_index >= d->shard_total) ||
	    strchr(d->dag, '/') || strchr(d->task, '/') || d->dag[0] == '.' ||
	    d->task[0] == '.')
		__builtin_trap();
	snprintf(path, sizeof(path), "%s/%s/%s/%s.log", "/var/log/ax",
	         *d->dag ? d->dag : "_", *d->task ? d->task : "_", d->run_id);
	ax_clock_fmt_utc(d->logical_time_us, logical, sizeof(logical));
	if (logical[0] < '0' || logical[0] > '9')
		__builtin_trap();
	us = d->timeout_ms * AX_USEC_PER_MSEC;
	us = d->kill_grace_ms * AX_USEC_PER_MSEC;
	(void) us;
	for (size_t i = 0; i < d->n_env; i++) {
		if (strchr(d->env[i]->key, '=') || !d->env[i]->key[0])
			__builtin_trap();
		if (asprintf(&kv, "%s=%s", d->env[i]->key, d->env[i]->value) >=
		    0)
			free(kv);
	}
}

static void
check_queue(const Ax__QueueMessage *m)
{
	switch (m->body_case) {
	case AX__QUEUE_MESSAGE__BODY_REGISTER_REPLY: {
		const Ax__RegisterReply *r = m->register_reply;
		if (r->session == 0 || r->heartbeat_interval_ms < 1 ||
		    r->lease_ttl_ms < 1 || r->retry_interval_ms < 0)
			__builtin_trap();
		check_run_ids(r->cancel_run_ids, r->n_cancel_run_ids);
		break;
	}
	case AX__QUEUE_MESSAGE__BODY_DISPATCH:
		for (size_t i = 0; i < m->dispatch->n_dispatches; i++) {
			const Ax__Dispatch *d = m->dispatch->dispatches[i];
			if (ax_wproto_dispatch(d) == AX_OK)
				use_dispatch(d);
			else if (ax_err_detail()[0] == '\0')
				__builtin_trap();
		}
		break;
	case AX__QUEUE_MESSAGE__BODY_HEARTBEAT_REPLY:
		check_run_ids(m->heartbeat_reply->cancel_run_ids,
		              m->heartbeat_reply->n_cancel_run_ids);
		check_run_ids(m->heartbeat_reply->unknown_run_ids,
		              m->heartbeat_reply->n_unknown_run_ids);
		break;
	default:
		break;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if ((data[0] & 1) == 0) {
		Ax__WorkerMessage *m = NULL;
		ax_err rv = ax_wproto_worker_msg(data + 1, size - 1, &m);
		if (rv == AX_OK)
			check_worker(m);
		else if (m != NULL || rv != AX_EPROTO ||
		         ax_err_detail()[0] == '\0')
			__builtin_trap();
		if (m != NULL)
			ax__worker_message__free_unpacked(m, NULL);
	} else {
		Ax__QueueMessage *m = NULL;
		ax_err rv = ax_wproto_queue_msg(data + 1, size - 1, &m);
		if (rv == AX_OK)
			check_queue(m);
		else if (m != NULL || rv != AX_EPROTO ||
		         ax_err_detail()[0] == '\0')
			__builtin_trap();
		if (m != NULL)
			ax__queue_message__free_unpacked(m, NULL);
	}
	return 0;
}
