/*
 * sink_openlineage.c - AX events -> OpenLineage RunEvents over HTTP (see
 * sink_openlineage.h).
 *
 * Invariants: the queue holds at most `cap` encoded events, oldest first;
 * only the sender thread takes from it and only the owner thread adds to
 * it; an event leaves the queue before it is POSTed, so a slow endpoint
 * never holds the lock. Stopping wakes every wait (backoff included).
 *
 * Workload: a few RunEvents per task attempt; the sender reuses one
 * libcurl handle (keep-alive) and POSTs one event per request.
 */
#include "sink_openlineage.h"

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "sha256.h"
#include "sink_pub.h"

#define OL_COMP        "openlineage"
#define OL_ATTEMPTS    5
#define OL_BACKOFF0_US (100 * AX_USEC_PER_MSEC)
#define OL_BACKOFF_MAX (5 * AX_USEC_PER_SEC)
#define OL_TIMEOUT_US  (5 * AX_USEC_PER_SEC)
#define OL_FACET_PARENT                                                       \
	"https://openlineage.io/spec/facets/1-0-1/ParentRunFacet.json#/"      \
	"$defs/"                                                              \
	"ParentRunFacet"
#define OL_FACET_NOMINAL                                                      \
	"https://openlineage.io/spec/facets/1-0-1/NominalTimeRunFacet.json#/" \
	"$defs/NominalTimeRunFacet"
#define OL_FACET_AX                                                           \
	"https://github.com/ax-scheduler/ax/blob/main/docs/events.md#the-ax-" \
	"run-facet"

struct ax_sink_ol {
	char            *url, *ns;
	int              max_attempts;
	int64_t          backoff0_us, timeout_us;
	pthread_t        thr;
	pthread_mutex_t  mu;
	pthread_cond_t   cv;
	char           **q; /* ring of JSON texts (owned) */
	size_t           cap, head, n;
	int              stop;     /* under mu */
	int64_t          stop_end; /* mono deadline of the drain, under mu */
	_Atomic uint64_t mapped, delivered, retries, dropped_full,
	    undeliverable, rejected;
};

/* ---------------------------------------------------------------------- */
/* mapping */

typedef enum { OL_NONE, OL_DAG, OL_TASK } ol_kind;

static ol_kind
map_type(const char *type, const char **ol_type)
{
	static const struct {
		const char *ax, *ol;
		ol_kind     kind;
	} m[] = {
		{ "run.created", "START", OL_DAG },
		{ "run.succeeded", "COMPLETE", OL_DAG },
		{ "run.failed", "FAIL", OL_DAG },
		{ "run.superseded", "ABORT", OL_DAG },
		{ "run.discarded", "ABORT", OL_DAG },
		{ "run.canceled", "ABORT", OL_DAG },
		{ "instance.running", "START", OL_TASK },
		{ "instance.succeeded", "COMPLETE", OL_TASK },
		{ "instance.failed", "FAIL", OL_TASK },
		{ "instance.timeout", "FAIL", OL_TASK },
		{ "instance.canceled", "ABORT", OL_TASK },
	};
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
		if (strcmp(type, m[i].ax) == 0) {
			*ol_type = m[i].ol;
			return m[i].kind;
		}
	return OL_NONE;
}

/* UUID (RFC 9562 version 8) from SHA-256 of the NUL-joined parts. */
static void
derive_uuid(const char *const *parts, size_t n, char out[37])
{
	ax_sha256 c;
	uint8_t   h[AX_SHA256_LEN];

	ax_sha256_init(&c);
	for (size_t i = 0; i < n; i++)
		ax_sha256_update(&c, parts[i], strlen(parts[i]) + 1);
	ax_sha256_final(&c, h);
	h[6] = (uint8_t) ((h[6] & 0x0f) | 0x80);
	h[8] = (uint8_t) ((h[8] & 0x3f) | 0x80);
	snprintf(out, 37,
	         "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x"
	         "%02x%02x",
	         h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9],
	         h[10], h[11], h[12], h[13], h[14], h[15]);
}

void
ax_sink_ol_dag_run_uuid(const char *ns, const char *dag, int64_t dag_run_id,
                        char out[37])
{
	char        id[24];
	const char *p[] = { "ax.dag_run", ns, dag, id };
	snprintf(id, sizeof(id), "%lld", (long long) dag_run_id);
	derive_uuid(p, 4, out);
}

static void
attempt_uuid(const char *ns, const Ax__Event *e, char out[37])
{
	char        iid[24], att[16];
	const char *p[] = { "ax.attempt", ns, e->dag, iid, att };
	snprintf(iid, sizeof(iid), "%lld", (long long) e->instance_id);
	snprintf(att, sizeof(att), "%d", (int) e->attempt);
	derive_uuid(p, 5, out);
}

/* The "ax" run facet: the AX event behind this RunEvent. */
static json_t *
ax_facet(const Ax__Event *e)
{
	json_t *payload = NULL;
	if (e->payload_json[0] != '\0') {
		payload = json_loads(e->payload_json, JSON_DECODE_ANY, NULL);
		if (payload == NULL)
			payload = json_string(e->payload_json);
	}
	return json_pack(
	    "{s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:i,s:i,s:i,s:s,s:o}", "_producer",
	    AX_OL_PRODUCER, "_schemaURL", OL_FACET_AX, "eventId", e->id,
	    "eventType", e->type, "reason", e->reason, "dagRunId",
	    (json_int_t) e->dag_run_id, "instanceId",
	    (json_int_t) e->instance_id, "attempt", (int) e->attempt,
	    "shardIndex", (int) e->shard_index, "shardTotal",
	    (int) e->shard_total, "traceId", e->trace_id, "payload",
	    payload != NULL ? payload : json_object());
}

ax_err
ax_sink_ol_event_json(const Ax__Event *e, const char *ns, char **out)
{
	const char *ol_type = NULL;
	ol_kind     kind    = map_type(e->type, &ol_type);
	char        run_id[37], parent[37], t[40], job[512];
	json_t     *facets, *o;

	*out = NULL;
	if (kind == OL_NONE || e->dag[0] == '\0' ||
	    (kind == OL_TASK && e->task[0] == '\0'))
		return ax_err_set(AX_ENOENT,
		                  "event %s: no OpenLineage mapping", e->type);
	ax_sink_ol_dag_run_uuid(ns, e->dag, e->dag_run_id, parent);
	if (kind == OL_DAG) {
		snprintf(run_id, sizeof(run_id), "%s", parent);
		snprintf(job, sizeof(job), "%s", e->dag);
	} else {
		if (e->run_id[0] != '\0')
			snprintf(run_id, sizeof(run_id), "%s", e->run_id);
		else
			attempt_uuid(ns, e, run_id);
		snprintf(job, sizeof(job), "%s.%s", e->dag, e->task);
	}
	if ((facets = json_object()) == NULL)
		return ax_err_set(AX_ENOMEM, "openlineage: out of memory");
	if (kind == OL_TASK)
		json_object_set_new(
		    facets, "parent",
		    json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:s}}", "_producer",
		              AX_OL_PRODUCER, "_schemaURL", OL_FACET_PARENT,
		              "run", "runId", parent, "job", "namespace", ns,
		              "name", e->dag));
	if (e->logical_time_us != 0) {
		ax_sink_pub_time(e->logical_time_us, t, sizeof(t));
		json_object_set_new(facets, "nominalTime",
		                    json_pack("{s:s,s:s,s:s}", "_producer",
		                              AX_OL_PRODUCER, "_schemaURL",
		                              OL_FACET_NOMINAL,
		                              "nominalStartTime", t));
	}
	json_object_set_new(facets, "ax", ax_facet(e));
	ax_sink_pub_time(e->time_us, t, sizeof(t));
	o = json_pack("{s:s,s:s,s:s,s:s,s:{s:s,s:o},s:{s:s,s:s},s:[],s:[]}",
	              "eventType", ol_type, "eventTime", t, "producer",
	              AX_OL_PRODUCER, "schemaURL", AX_OL_SCHEMA_URL, "run",
	              "runId", run_id, "facets", facets, "job", "namespace",
	              ns, "name", job, "inputs", "outputs");
	if (o == NULL)
		return ax_err_set(AX_ENOMEM, "openlineage: cannot encode %s",
		                  e->type);
	*out = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return *out != NULL
	    ? AX_OK
	    : ax_err_set(AX_ENOMEM, "openlineage: out of memory");
}

/* ---------------------------------------------------------------------- */
/* sender */

static void
deadline_in(struct timespec *ts, int64_t us)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += us / AX_USEC_PER_SEC;
	ts->tv_nsec += (long) (us % AX_USEC_PER_SEC) * 1000;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static size_t
discard_body(char *p, size_t sz, size_t n, void *u)
{
	(void) p;
	(void) u;
	return sz * n;
}

typedef enum { POST_OK, POST_RETRY, POST_REJECT } post_result;

static post_result
post(ax_sink_ol *ol, CURL *h, const char *body)
{
	long     code = 0;
	CURLcode rc;

	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long) strlen(body));
	rc = curl_easy_perform(h);
	if (rc != CURLE_OK) {
		ax_logf(AX_LOG_DEBUG, OL_COMP, NULL, NULL, "POST %s: %s",
		        ol->url, curl_easy_strerror(rc));
		return POST_RETRY;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	if (code >= 200 && code < 300)
		return POST_OK;
	ax_logf(AX_LOG_DEBUG, OL_COMP, NULL, NULL, "POST %s: HTTP %ld",
	        ol->url, code);
	if (code >= 500 || code == 408 || code == 429)
		return POST_RETRY;
	return POST_REJECT;
}

/* Takes the oldest queued event, waiting while there is none; NULL when
 * stopping and (empty or the drain deadline passed). */
static char *
take(ax_sink_ol *ol)
{
	char *body = NULL;

	pthread_mutex_lock(&ol->mu);
	while (ol->n == 0 && !ol->stop)
		pthread_cond_wait(&ol->cv, &ol->mu);
	if (ol->n > 0 && (!ol->stop || ax_clock_mono_us() < ol->stop_end)) {
		body     = ol->q[ol->head];
		ol->head = (ol->head + 1) % ol->cap;
		ol->n--;
	}
	pthread_mutex_unlock(&ol->mu);
	return body;
}

/* Sleeps us unless stopping; returns 1 when stopping. */
static int
backoff_wait(ax_sink_ol *ol, int64_t us)
{
	struct timespec ts;
	int             stop;

	deadline_in(&ts, us);
	pthread_mutex_lock(&ol->mu);
	while (!ol->stop && pthread_cond_timedwait(&ol->cv, &ol->mu, &ts) == 0)
		;
	stop = ol->stop;
	pthread_mutex_unlock(&ol->mu);
	return stop;
}

static void
deliver(ax_sink_ol *ol, CURL *h, char *body)
{
	int64_t delay = ol->backoff0_us;

	for (int a = 1;; a++) {
		post_result r = post(ol, h, body);
		if (r == POST_OK) {
			atomic_fetch_add(&ol->delivered, 1);
			return;
		}
		if (r == POST_REJECT) {
			atomic_fetch_add(&ol->rejected, 1);
			ax_logf(AX_LOG_WARN, OL_COMP, NULL, NULL,
			        "%s refused an event (4xx): dropped", ol->url);
			return;
		}
		if (a >= ol->max_attempts || backoff_wait(ol, delay)) {
			atomic_fetch_add(&ol->undeliverable, 1);
			ax_logf(AX_LOG_WARN, OL_COMP, NULL, NULL,
			        "cannot deliver an event to %s after %d "
			        "attempts: dropped",
			        ol->url, a);
			return;
		}
		atomic_fetch_add(&ol->retries, 1);
		delay =
		    delay * 2 > OL_BACKOFF_MAX ? OL_BACKOFF_MAX : delay * 2;
	}
}

static void *
sender(void *arg)
{
	ax_sink_ol        *ol  = arg;
	CURL              *h   = curl_easy_init();
	struct curl_slist *hdr = NULL;
	char              *body;

	if (h != NULL) {
		hdr = curl_slist_append(hdr, "Content-Type: application/json");
		curl_easy_setopt(h, CURLOPT_URL, ol->url);
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
		curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
		                 (long) (ol->timeout_us / AX_USEC_PER_MSEC));
		curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
		                 (long) (ol->timeout_us / AX_USEC_PER_MSEC));
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard_body);
		curl_easy_setopt(h, CURLOPT_USERAGENT, "ax/" AX_VERSION);
	}
	while ((body = take(ol)) != NULL) {
		if (h == NULL)
			atomic_fetch_add(&ol->undeliverable, 1);
		else
			deliver(ol, h, body);
		free(body);
	}
	curl_slist_free_all(hdr);
	if (h != NULL)
		curl_easy_cleanup(h);
	return NULL;
}

/* ---------------------------------------------------------------------- */
/* owner side */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode       curl_init_rc;

static void
init_curl(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

ax_err
ax_sink_ol_new(const ax_sink_ol_config *cfg, ax_sink_ol **out)
{
	ax_sink_ol *ol;

	*out = NULL;
	if (cfg->url == NULL || cfg->url[0] == '\0')
		return ax_err_set(AX_EINVAL, "openlineage.url is empty");
	if (cfg->ns == NULL || cfg->ns[0] == '\0')
		return ax_err_set(AX_EINVAL,
		                  "openlineage.namespace is empty; set a job "
		                  "namespace such as \"ax\"");
	if (cfg->capacity == 0)
		return ax_err_set(AX_EINVAL,
		                  "openlineage.buffer must be at least 1");
	pthread_once(&curl_once, init_curl);
	if (curl_init_rc != CURLE_OK)
		return ax_err_set(AX_EIO, "openlineage: libcurl: %s",
		                  curl_easy_strerror(curl_init_rc));
	if ((ol = calloc(1, sizeof(*ol))) == NULL ||
	    (ol->q = calloc(cfg->capacity, sizeof(*ol->q))) == NULL ||
	    (ol->url = strdup(cfg->url)) == NULL ||
	    (ol->ns = strdup(cfg->ns)) == NULL) {
		if (ol != NULL) {
			free(ol->q);
			free(ol->url);
		}
		free(ol);
		return ax_err_set(AX_ENOMEM, "openlineage: out of memory");
	}
	ol->cap = cfg->capacity;
	ol->max_attempts =
	    cfg->max_attempts > 0 ? cfg->max_attempts : OL_ATTEMPTS;
	ol->backoff0_us =
	    cfg->backoff0_us > 0 ? cfg->backoff0_us : OL_BACKOFF0_US;
	ol->timeout_us = cfg->timeout_us > 0 ? cfg->timeout_us : OL_TIMEOUT_US;
	pthread_mutex_init(&ol->mu, NULL);
	{
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&ol->cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	if (pthread_create(&ol->thr, NULL, sender, ol) != 0) {
		pthread_cond_destroy(&ol->cv);
		pthread_mutex_destroy(&ol->mu);
		free(ol->q);
		free(ol->url);
		free(ol->ns);
		free(ol);
		return ax_err_set(AX_EIO, "openlineage: cannot start thread");
	}
	*out = ol;
	return AX_OK;
}

int
ax_sink_ol_submit(ax_sink_ol *ol, const Ax__Event *e)
{
	char *body   = NULL;
	int   queued = 0;

	if (ax_sink_ol_event_json(e, ol->ns, &body) != AX_OK)
		return 0;
	atomic_fetch_add(&ol->mapped, 1);
	pthread_mutex_lock(&ol->mu);
	if (ol->n < ol->cap && !ol->stop) {
		ol->q[(ol->head + ol->n++) % ol->cap] = body;
		body                                  = NULL;
		queued                                = 1;
		pthread_cond_signal(&ol->cv);
	}
	pthread_mutex_unlock(&ol->mu);
	if (!queued) {
		/* full: the newest is refused so what waits keeps its order */
		if (atomic_fetch_add(&ol->dropped_full, 1) == 0)
			ax_logf(AX_LOG_WARN, OL_COMP, NULL, NULL,
			        "buffer of %zu events full (%s slow or down): "
			        "dropping events, counted in "
			        "ax_event_sink_dropped_total",
			        ol->cap, ol->url);
		free(body);
	}
	return queued;
}

void
ax_sink_ol_stats_get(ax_sink_ol *ol, ax_sink_ol_stats *out)
{
	out->mapped        = atomic_load(&ol->mapped);
	out->delivered     = atomic_load(&ol->delivered);
	out->retries       = atomic_load(&ol->retries);
	out->dropped_full  = atomic_load(&ol->dropped_full);
	out->undeliverable = atomic_load(&ol->undeliverable);
	out->rejected      = atomic_load(&ol->rejected);
	pthread_mutex_lock(&ol->mu);
	out->queued = ol->n;
	pthread_mutex_unlock(&ol->mu);
}

void
ax_sink_ol_free(ax_sink_ol *ol, int64_t drain_us, ax_sink_ol_stats *final)
{
	if (ol == NULL)
		return;
	pthread_mutex_lock(&ol->mu);
	ol->stop     = 1;
	ol->stop_end = ax_clock_mono_us() + (drain_us > 0 ? drain_us : 0);
	pthread_cond_broadcast(&ol->cv);
	pthread_mutex_unlock(&ol->mu);
	pthread_join(ol->thr, NULL);
	for (size_t i = 0; i < ol->n; i++)
		free(ol->q[(ol->head + i) % ol->cap]);
	atomic_fetch_add(&ol->undeliverable, ol->n);
	if (ol->n > 0)
		ax_logf(AX_LOG_WARN, OL_COMP, NULL, NULL,
		        "stopped with %zu events not delivered to %s", ol->n,
		        ol->url);
	ol->n = 0;
	if (final != NULL)
		ax_sink_ol_stats_get(ol, final);
	pthread_cond_destroy(&ol->cv);
	pthread_mutex_destroy(&ol->mu);
	free(ol->q);
	free(ol->url);
	free(ol->ns);
	free(ol);
}
