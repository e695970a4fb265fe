/*
 * worker_proto.c - decoding and checking of the worker protocol at both
 * ends (see worker_proto.h). Pure: no I/O, no state.
 *
 * Each check names the first offending field; a refused message is freed
 * here, so a caller sees either a checked message or an error.
 */
#include "worker_proto.h"

#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include "clock.h"
#include "resources.h"

/* Length of s when it is at most max bytes with no control characters
 * (tab aside), else -1. */
static long
text_len(const char *s, size_t max)
{
	size_t n = 0;

	if (s == NULL)
		return 0;
	for (; s[n] != '\0'; n++)
		if (n >= max ||
		    ((unsigned char) s[n] < 0x20 && s[n] != '\t') ||
		    s[n] == 0x7f)
			return -1;
	return (long) n;
}

static ax_err
bad_text(const char *msg, const char *field, size_t max)
{
	return ax_err_set(AX_EPROTO,
	                  "%s.%s is over %zu bytes or has control "
	                  "characters",
	                  msg, field, max);
}

#define TEXT(msg, field, s, max)                                              \
	do {                                                                  \
		if (text_len((s), (max)) < 0)                                 \
			return bad_text((msg), (field), (max));               \
	} while (0)

#define RANGE(msg, field, v, lo, hi)                                          \
	do {                                                                  \
		if ((int64_t) (v) < (int64_t) (lo) ||                         \
		    (int64_t) (v) > (int64_t) (hi))                           \
			return ax_err_set(AX_EPROTO,                          \
			                  "%s.%s is %" PRId64 "; %" PRId64    \
			                  "..%" PRId64 " allowed",            \
			                  (msg), (field), (int64_t) (v),      \
			                  (int64_t) (lo), (int64_t) (hi));    \
	} while (0)

int
ax_wproto_run_id_ok(const char *s)
{
	size_t n = 0;

	if (s == NULL || s[0] == '\0' || s[0] == '.')
		return 0;
	for (; s[n] != '\0'; n++) {
		char c = s[n];
		if (n >= AX_WPROTO_RUN_ID_MAX ||
		    !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-'))
			return 0;
	}
	return 1;
}

static ax_err
run_id(const char *msg, const char *field, const char *s)
{
	if (ax_wproto_run_id_ok(s))
		return AX_OK;
	return ax_err_set(AX_EPROTO,
	                  "%s.%s '%.40s%s' is not a run_id (1..%d of "
	                  "[A-Za-z0-9._-], not starting with '.')",
	                  msg, field, s ? s : "",
	                  s && strlen(s) > 40 ? "..." : "",
	                  AX_WPROTO_RUN_ID_MAX);
}

static ax_err
run_ids(const char *msg, const char *field, char **v, size_t n)
{
	ax_err rv;

	RANGE(msg, field, n, 0, AX_WPROTO_LIST_MAX);
	for (size_t i = 0; i < n; i++)
		if ((rv = run_id(msg, field, v[i])) != AX_OK)
			return rv;
	return AX_OK;
}

/* A name that becomes one path component: no '/', not "." or "..". */
static ax_err
path_name(const char *msg, const char *field, const char *s)
{
	TEXT(msg, field, s, AX_WPROTO_NAME_MAX);
	if (s != NULL && (strchr(s, '/') != NULL || s[0] == '.'))
		return ax_err_set(AX_EPROTO,
		                  "%s.%s '%.64s' cannot be a path component "
		                  "(a '/' or a leading '.')",
		                  msg, field, s);
	return AX_OK;
}

/* ------------------------------------------------- worker -> queue */

static ax_err
check_register(const Ax__Register *r)
{
	ax_err rv;

	if (r->worker_id == NULL || r->worker_id[0] == '\0')
		return ax_err_set(AX_EPROTO, "Register.worker_id is empty");
	TEXT("Register", "worker_id", r->worker_id, AX_WPROTO_NAME_MAX);
	TEXT("Register", "worker_group", r->worker_group, AX_WPROTO_NAME_MAX);
	TEXT("Register", "hostname", r->hostname, AX_WPROTO_NAME_MAX);
	TEXT("Register", "version", r->version, AX_WPROTO_NAME_MAX);
	RANGE("Register", "slots", r->slots, 1, AX_WPROTO_SLOTS_MAX);
	RANGE("Register", "reserve_p0", r->reserve_p0, 0, r->slots);
	RANGE("Register", "cpu_milli", r->cpu_milli, 0,
	      AX_WPROTO_CPU_MILLI_MAX);
	RANGE("Register", "memory_bytes", r->memory_bytes, 0,
	      AX_WPROTO_MEMORY_MAX);
	RANGE("Register", "pid", r->pid, 0, INT32_MAX);
	RANGE("Register", "prefetch", r->prefetch, 0, AX_WPROTO_SLOTS_MAX);
	RANGE("Register", "labels", r->n_labels, 0, AX_WPROTO_LABELS_MAX);
	for (size_t i = 0; i < r->n_labels; i++) {
		TEXT("Register", "labels key", r->labels[i]->key,
		     AX_WPROTO_NAME_MAX);
		TEXT("Register", "labels value", r->labels[i]->value,
		     AX_WPROTO_TEXT_MAX);
	}
	RANGE("Register", "resources", r->n_resources, 0, AX_RES_MAX);
	for (size_t i = 0; i < r->n_resources; i++) {
		if (!ax_res_name_ok(r->resources[i]->key))
			return ax_err_set(
			    AX_EPROTO,
			    "Register.resources key '%.64s' is not "
			    "a resource name",
			    r->resources[i]->key ? r->resources[i]->key : "");
		RANGE("Register", "resources value", r->resources[i]->value, 1,
		      AX_RES_AMOUNT_MAX);
	}
	RANGE("Register", "task_types", r->n_task_types, 0,
	      AX_WPROTO_LABELS_MAX);
	for (size_t i = 0; i < r->n_task_types; i++)
		TEXT("Register", "task_types", r->task_types[i],
		     AX_WPROTO_NAME_MAX);
	if ((rv = run_ids("Register", "running_run_ids", r->running_run_ids,
	                  r->n_running_run_ids)) != AX_OK)
		return rv;
	return AX_OK;
}

static ax_err
check_started(const Ax__Started *s)
{
	ax_err rv;

	if ((rv = run_id("Started", "run_id", s->run_id)) != AX_OK)
		return rv;
	RANGE("Started", "pid", s->pid, 0, INT32_MAX);
	return AX_OK;
}

static ax_err
check_result(const Ax__Result *r)
{
	ax_err rv;

	if ((rv = run_id("Result", "run_id", r->run_id)) != AX_OK)
		return rv;
	TEXT("Result", "log_path", r->log_path, AX_WPROTO_PATH_MAX);
	if (r->error != NULL && strlen(r->error) > AX_WPROTO_TEXT_MAX)
		return bad_text("Result", "error", AX_WPROTO_TEXT_MAX);
	RANGE("Result", "cpu_user_us", r->cpu_user_us, 0, INT64_MAX);
	RANGE("Result", "cpu_sys_us", r->cpu_sys_us, 0, INT64_MAX);
	RANGE("Result", "max_rss_kb", r->max_rss_kb, 0, INT64_MAX);
	RANGE("Result", "log_bytes", r->log_bytes, 0, INT64_MAX);
	return AX_OK;
}

static ax_err
check_worker_body(const Ax__WorkerMessage *m)
{
	ax_err rv = AX_OK;

	switch (m->body_case) {
	case AX__WORKER_MESSAGE__BODY_REGISTER:
		return check_register(m->register_);
	case AX__WORKER_MESSAGE__BODY_PULL:
		RANGE("Pull", "free_slots", m->pull->free_slots, 0,
		      AX_WPROTO_SLOTS_MAX);
		RANGE("Pull", "wait_ms", m->pull->wait_ms, 0, INT32_MAX);
		return AX_OK;
	case AX__WORKER_MESSAGE__BODY_HEARTBEAT: {
		const Ax__Heartbeat *h = m->heartbeat;
		RANGE("Heartbeat", "slots_total", h->slots_total, 0,
		      AX_WPROTO_SLOTS_MAX);
		RANGE("Heartbeat", "slots_free", h->slots_free,
		      -AX_WPROTO_SLOTS_MAX, AX_WPROTO_SLOTS_MAX);
		RANGE("Heartbeat", "load_x100", h->load_x100, 0, INT32_MAX);
		RANGE("Heartbeat", "rss_kb", h->rss_kb, 0, INT64_MAX);
		RANGE("Heartbeat", "cpus", h->cpus, 0,
		      AX_WPROTO_CPU_MILLI_MAX);
		RANGE("Heartbeat", "mem_total_kb", h->mem_total_kb, 0,
		      INT64_MAX);
		RANGE("Heartbeat", "mem_available_kb", h->mem_available_kb, 0,
		      INT64_MAX);
		RANGE("Heartbeat", "tasks", h->n_tasks, 0, AX_WPROTO_LIST_MAX);
		for (size_t i = 0; i < h->n_tasks; i++) {
			if ((rv = run_id("Heartbeat", "tasks run_id",
			                 h->tasks[i]->run_id)) != AX_OK)
				return rv;
			RANGE("Heartbeat", "tasks cpu_milli",
			      h->tasks[i]->cpu_milli, 0,
			      AX_WPROTO_CPU_MILLI_MAX);
			RANGE("Heartbeat", "tasks rss_kb", h->tasks[i]->rss_kb,
			      0, INT64_MAX);
		}
		return run_ids("Heartbeat", "running_run_ids",
		               h->running_run_ids, h->n_running_run_ids);
	}
	case AX__WORKER_MESSAGE__BODY_STARTED:
		return check_started(m->started);
	case AX__WORKER_MESSAGE__BODY_RESULT:
		return check_result(m->result);
	case AX__WORKER_MESSAGE__BODY_REPORT: {
		const Ax__Report *r = m->report;
		RANGE("Report", "started + results",
		      (uint64_t) r->n_started + r->n_results, 0,
		      AX_WPROTO_LIST_MAX);
		for (size_t i = 0; rv == AX_OK && i < r->n_started; i++)
			rv = check_started(r->started[i]);
		for (size_t i = 0; rv == AX_OK && i < r->n_results; i++)
			rv = check_result(r->results[i]);
		if (rv == AX_OK)
			rv = run_ids("Report", "withdrawn_run_ids",
			             r->withdrawn_run_ids,
			             r->n_withdrawn_run_ids);
		return rv;
	}
	case AX__WORKER_MESSAGE__BODY_DEREGISTER:
		return run_ids("Deregister", "running_run_ids",
		               m->deregister->running_run_ids,
		               m->deregister->n_running_run_ids);
	case AX__WORKER_MESSAGE__BODY_ACK_ONLY:
		return run_ids("Ack", "acked_run_ids",
		               m->ack_only->acked_run_ids,
		               m->ack_only->n_acked_run_ids);
	default:
		return AX_OK; /* no body or a newer one: unsupported */
	}
}

ax_err
ax_wproto_worker_msg(const void *buf, size_t len, Ax__WorkerMessage **out)
{
	Ax__WorkerMessage *m;
	ax_err             rv = AX_OK;

	*out = NULL;
	m    = ax__worker_message__unpack(NULL, len, buf);
	if (m == NULL)
		return ax_err_set(
		    AX_EPROTO, "not an ax.WorkerMessage (proto/worker.proto)");
	if (text_len(m->worker_id, AX_WPROTO_NAME_MAX) < 0)
		rv =
		    bad_text("WorkerMessage", "worker_id", AX_WPROTO_NAME_MAX);
	if (rv == AX_OK && m->ack != NULL)
		rv = run_ids("WorkerMessage.ack", "acked_run_ids",
		             m->ack->acked_run_ids, m->ack->n_acked_run_ids);
	if (rv == AX_OK)
		rv = check_worker_body(m);
	if (rv != AX_OK) {
		ax__worker_message__free_unpacked(m, NULL);
		return rv;
	}
	*out = m;
	return AX_OK;
}

/* ------------------------------------------------- queue -> worker */

static ax_err
check_queue_body(const Ax__QueueMessage *m)
{
	ax_err rv;

	switch (m->body_case) {
	case AX__QUEUE_MESSAGE__BODY_REGISTER_REPLY: {
		const Ax__RegisterReply *r = m->register_reply;
		if (r->session == 0)
			return ax_err_set(AX_EPROTO,
			                  "RegisterReply.session is 0");
		RANGE("RegisterReply", "heartbeat_interval_ms",
		      r->heartbeat_interval_ms, 1, INT32_MAX);
		RANGE("RegisterReply", "lease_ttl_ms", r->lease_ttl_ms, 1,
		      INT32_MAX);
		RANGE("RegisterReply", "retry_interval_ms",
		      r->retry_interval_ms, 0, INT32_MAX);
		return run_ids("RegisterReply", "cancel_run_ids",
		               r->cancel_run_ids, r->n_cancel_run_ids);
	}
	case AX__QUEUE_MESSAGE__BODY_DISPATCH:
		RANGE("DispatchBatch", "dispatches", m->dispatch->n_dispatches,
		      0, AX_WPROTO_LIST_MAX);
		return AX_OK; /* each one: ax_wproto_dispatch() */
	case AX__QUEUE_MESSAGE__BODY_ACK:
		return run_ids("Ack", "acked_run_ids", m->ack->acked_run_ids,
		               m->ack->n_acked_run_ids);
	case AX__QUEUE_MESSAGE__BODY_HEARTBEAT_REPLY: {
		const Ax__HeartbeatReply *h = m->heartbeat_reply;
		if ((rv = run_ids("HeartbeatReply", "cancel_run_ids",
		                  h->cancel_run_ids, h->n_cancel_run_ids)) !=
		    AX_OK)
			return rv;
		RANGE("HeartbeatReply", "cancel_grace_ms",
		      h->n_cancel_grace_ms, 0, h->n_cancel_run_ids);
		for (size_t i = 0; i < h->n_cancel_grace_ms; i++)
			RANGE("HeartbeatReply", "cancel_grace_ms",
			      h->cancel_grace_ms[i], 0, 24 * 3600 * 1000LL);
		if ((rv = run_ids("HeartbeatReply", "withdraw_run_ids",
		                  h->withdraw_run_ids,
		                  h->n_withdraw_run_ids)) != AX_OK)
			return rv;
		return run_ids("HeartbeatReply", "unknown_run_ids",
		               h->unknown_run_ids, h->n_unknown_run_ids);
	}
	case AX__QUEUE_MESSAGE__BODY_ERROR:
		TEXT("Error", "code", m->error->code, AX_WPROTO_NAME_MAX);
		if (m->error->message != NULL &&
		    strlen(m->error->message) > AX_WPROTO_TEXT_MAX)
			return bad_text("Error", "message",
			                AX_WPROTO_TEXT_MAX);
		return AX_OK;
	default:
		return AX_OK; /* no body or a newer one: ignored */
	}
}

ax_err
ax_wproto_queue_msg(const void *buf, size_t len, Ax__QueueMessage **out)
{
	Ax__QueueMessage *m;
	ax_err            rv;

	*out = NULL;
	m    = ax__queue_message__unpack(NULL, len, buf);
	if (m == NULL)
		return ax_err_set(
		    AX_EPROTO, "not an ax.QueueMessage (proto/worker.proto)");
	if ((rv = check_queue_body(m)) != AX_OK) {
		ax__queue_message__free_unpacked(m, NULL);
		return rv;
	}
	*out = m;
	return AX_OK;
}

ax_err
ax_wproto_dispatch(const Ax__Dispatch *d)
{
	/* timeouts are converted to microseconds: keep the product in
	 * range (about 292 years) */
	const int64_t ms_max = INT64_MAX / AX_USEC_PER_MSEC;
	ax_err        rv;

	if ((rv = run_id("Dispatch", "run_id", d->run_id)) != AX_OK ||
	    (rv = path_name("Dispatch", "dag", d->dag)) != AX_OK ||
	    (rv = path_name("Dispatch", "task", d->task)) != AX_OK)
		return rv;
	TEXT("Dispatch", "task_type", d->task_type, AX_WPROTO_NAME_MAX);
	TEXT("Dispatch", "log_path", d->log_path, AX_WPROTO_PATH_MAX);
	TEXT("Dispatch", "workdir", d->workdir, AX_WPROTO_PATH_MAX);
	TEXT("Dispatch", "trace_id", d->trace_id, AX_WPROTO_NAME_MAX);
	RANGE("Dispatch", "attempt", d->attempt, 0, INT32_MAX);
	RANGE("Dispatch", "shard_total", d->shard_total, 0, INT32_MAX);
	RANGE("Dispatch", "shard_index", d->shard_index, 0,
	      d->shard_total > 1 ? d->shard_total - 1 : 0);
	RANGE("Dispatch", "slots", d->slots, 0, AX_WPROTO_SLOTS_MAX);
	RANGE("Dispatch", "timeout_ms", d->timeout_ms, 0, ms_max);
	RANGE("Dispatch", "kill_grace_ms", d->kill_grace_ms, 0, ms_max);
	RANGE("Dispatch", "start_after_us", d->start_after_us, 0,
	      AX_WPROTO_START_AFTER_MAX);
	RANGE("Dispatch", "logical_time_us", d->logical_time_us,
	      AX_WPROTO_TIME_MIN, AX_WPROTO_TIME_MAX);
	RANGE("Dispatch", "env", d->n_env, 0, AX_WPROTO_LABELS_MAX);
	for (size_t i = 0; i < d->n_env; i++) {
		const char *k = d->env[i]->key;
		if (k == NULL || k[0] == '\0' || strchr(k, '=') != NULL ||
		    text_len(k, AX_WPROTO_NAME_MAX) < 0)
			return ax_err_set(AX_EPROTO,
			                  "Dispatch.env name '%.64s' is not a "
			                  "name (1..%d bytes, no '=')",
			                  k ? k : "", AX_WPROTO_NAME_MAX);
	}
	if (d->rlimits != NULL) {
		RANGE("Rlimits", "cpu_seconds", d->rlimits->cpu_seconds, 0,
		      INT64_MAX);
		RANGE("Rlimits", "address_space_bytes",
		      d->rlimits->address_space_bytes, 0, INT64_MAX);
		RANGE("Rlimits", "open_files", d->rlimits->open_files, 0,
		      INT64_MAX);
		RANGE("Rlimits", "processes", d->rlimits->processes, 0,
		      INT64_MAX);
	}
	return AX_OK;
}
