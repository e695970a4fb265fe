/*
 * sink_pub.c - events published on an nng PUB socket (see sink_pub.h).
 *
 * Invariants: the socket is opened once and only the owner thread sends;
 * a message is either accepted by nng (then owned by nng) or freed here
 * and counted as dropped.
 *
 * Workload: every event of the pipeline (several per task instance); one
 * JSON encoding and one nng message per event while a subscriber is
 * connected, nothing otherwise (pipe notifications keep the count: PUB
 * would discard the message anyway; perf during `axctl bench --scenario
 * throughput` showed the encoding among axd's larger costs).
 */
#include "sink_pub.h"

#include <jansson.h>
#include <nng/nng.h>
#include <nng/protocol/pubsub0/pub.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ax_sink_pub {
	nng_socket       sock;
	_Atomic int      subscribers; /* connected pipes */
	_Atomic uint64_t published, dropped, unheard;
};

static void
pipe_event(nng_pipe pipe, nng_pipe_ev ev, void *arg)
{
	ax_sink_pub *p = arg;
	(void) pipe;
	if (ev == NNG_PIPE_EV_ADD_POST)
		atomic_fetch_add(&p->subscribers, 1);
	else if (ev == NNG_PIPE_EV_REM_POST)
		atomic_fetch_sub(&p->subscribers, 1);
}

void
ax_sink_pub_time(int64_t us, char *buf, size_t len)
{
	time_t    s  = (time_t) (us / 1000000);
	long      f  = (long) (us % 1000000);
	struct tm tm = { 0 };

	if (f < 0) {
		f += 1000000;
		s -= 1;
	}
	gmtime_r(&s, &tm);
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ",
	         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	         tm.tm_min, tm.tm_sec, f);
}

char *
ax_sink_pub_event_json(const Ax__Event *e)
{
	char    t[40];
	json_t *payload = NULL, *o;
	char   *s;

	if (e->payload_json != NULL && e->payload_json[0] != '\0') {
		payload = json_loads(e->payload_json, JSON_DECODE_ANY, NULL);
		if (payload == NULL)
			payload = json_string(e->payload_json);
	}
	ax_sink_pub_time(e->time_us, t, sizeof(t));
#define S(x) ((x) != NULL ? (x) : "")
	o = json_pack(
	    "{s:s,s:s,s:s,s:I,s:s,s:I,s:I,s:s,s:I,s:s,s:i,s:s,s:s,s:s,s:I,"
	    "s:i,s:i,s:o}",
	    "id", S(e->id), "type", S(e->type), "time", t, "time_us",
	    (json_int_t) e->time_us, "dag", S(e->dag), "dag_version_id",
	    (json_int_t) e->dag_version_id, "dag_run_id",
	    (json_int_t) e->dag_run_id, "task", S(e->task), "instance_id",
	    (json_int_t) e->instance_id, "run_id", S(e->run_id), "attempt",
	    (int) e->attempt, "trace_id", S(e->trace_id), "reason",
	    S(e->reason), "source", S(e->source), "logical_time_us",
	    (json_int_t) e->logical_time_us, "shard_index",
	    (int) e->shard_index, "shard_total", (int) e->shard_total,
	    "payload", payload != NULL ? payload : json_null());
#undef S
	if (o == NULL)
		return NULL;
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return s;
}

ax_err
ax_sink_pub_open(const char *url, ax_sink_pub **out)
{
	ax_sink_pub *p;
	int          rv;

	*out = NULL;
	if (url == NULL || url[0] == '\0')
		return ax_err_set(
		    AX_EINVAL,
		    "events.pub: empty address; set an ipc:// or "
		    "tcp:// address");
	if ((p = calloc(1, sizeof(*p))) == NULL)
		return ax_err_set(AX_ENOMEM, "events.pub: out of memory");
	if ((rv = nng_pub0_open(&p->sock)) != 0) {
		free(p);
		return ax_err_set(AX_ENNG, "events.pub: %s", nng_strerror(rv));
	}
	(void) nng_socket_set_int(p->sock, NNG_OPT_SENDBUF,
	                          AX_SINK_PUB_SENDBUF);
	if ((rv = nng_pipe_notify(p->sock, NNG_PIPE_EV_ADD_POST, pipe_event,
	                          p)) != 0 ||
	    (rv = nng_pipe_notify(p->sock, NNG_PIPE_EV_REM_POST, pipe_event,
	                          p)) != 0) {
		nng_close(p->sock);
		free(p);
		return ax_err_set(AX_ENNG, "events.pub: %s", nng_strerror(rv));
	}
	if ((rv = nng_listen(p->sock, url, NULL, 0)) != 0) {
		nng_close(p->sock);
		free(p);
		return ax_err_set(rv == NNG_EADDRINUSE ? AX_EEXIST : AX_ENNG,
		                  "events.pub: cannot listen on %s: %s%s", url,
		                  nng_strerror(rv),
		                  rv == NNG_EADDRINUSE
		                      ? " (another axd publishes there? set "
		                        "events.pub to another address)"
		                      : "");
	}
	*out = p;
	return AX_OK;
}

void
ax_sink_pub_publish(ax_sink_pub *p, const Ax__Event *e)
{
	if (atomic_load(&p->subscribers) <= 0) {
		atomic_fetch_add(&p->unheard, 1);
		return;
	}
	char    *js = ax_sink_pub_event_json(e);
	nng_msg *m  = NULL;

	if (js == NULL || nng_msg_alloc(&m, 0) != 0 ||
	    nng_msg_append(m, e->type, strlen(e->type) + 1) != 0 ||
	    nng_msg_append(m, js, strlen(js)) != 0 ||
	    nng_sendmsg(p->sock, m, NNG_FLAG_NONBLOCK) != 0) {
		if (m != NULL)
			nng_msg_free(m);
		atomic_fetch_add(&p->dropped, 1);
	} else {
		atomic_fetch_add(&p->published, 1);
	}
	free(js);
}

void
ax_sink_pub_stats_get(const ax_sink_pub *p, ax_sink_pub_stats *out)
{
	ax_sink_pub *m = (ax_sink_pub *) p;
	out->published = atomic_load(&m->published);
	out->dropped   = atomic_load(&m->dropped);
	out->unheard   = atomic_load(&m->unheard);
}

void
ax_sink_pub_close(ax_sink_pub *p)
{
	if (p == NULL)
		return;
	nng_close(p->sock);
	free(p);
}
