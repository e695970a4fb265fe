/*
 * sink_openlineage.c - AX events -> OpenLineage RunEvents over HTTP (see
 * sink_openlineage.h).
 *
 * The mapping is here; the bounded queue, the sender thread and its
 * retries are sink_http.c's (overflow policy DROP_NEWEST: what waits
 * keeps its order, which lineage consumers rely on).
 *
 * Workload: a few RunEvents per task attempt; one POST per event.
 */
#include "sink_openlineage.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sha256.h"
#include "sink_http.h"
#include "sink_pub.h"

#define OL_COMP "openlineage"
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
	char            *ns;
	ax_sink_http    *http; /* queue and sender (owned) */
	_Atomic uint64_t mapped;
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
/* owner side */

ax_err
ax_sink_ol_new(const ax_sink_ol_config *cfg, ax_sink_ol **out)
{
	ax_sink_ol *ol;
	ax_err      rv;

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
	if ((ol = calloc(1, sizeof(*ol))) == NULL ||
	    (ol->ns = strdup(cfg->ns)) == NULL) {
		free(ol);
		return ax_err_set(AX_ENOMEM, "openlineage: out of memory");
	}
	ax_sink_http_config hc = {
		.name         = OL_COMP,
		.url          = cfg->url,
		.capacity     = cfg->capacity,
		.max_attempts = cfg->max_attempts,
		.backoff0_us  = cfg->backoff0_us,
		.timeout_us   = cfg->timeout_us,
		.overflow     = AX_SINK_HTTP_DROP_NEWEST,
	};
	if ((rv = ax_sink_http_new(&hc, &ol->http)) != AX_OK) {
		free(ol->ns);
		free(ol);
		return rv;
	}
	*out = ol;
	return AX_OK;
}

int
ax_sink_ol_submit(ax_sink_ol *ol, const Ax__Event *e)
{
	char *body = NULL;

	if (ax_sink_ol_event_json(e, ol->ns, &body) != AX_OK)
		return 0;
	atomic_fetch_add(&ol->mapped, 1);
	/* full: the newest is refused so what waits keeps its order */
	return ax_sink_http_push(ol->http, body);
}

static void
copy_stats(const ax_sink_http_stats *h, uint64_t mapped, ax_sink_ol_stats *out)
{
	out->mapped        = mapped;
	out->delivered     = h->delivered;
	out->retries       = h->retries;
	out->dropped_full  = h->dropped_full;
	out->undeliverable = h->undeliverable;
	out->rejected      = h->rejected;
	out->queued        = h->queued;
}

void
ax_sink_ol_stats_get(ax_sink_ol *ol, ax_sink_ol_stats *out)
{
	ax_sink_http_stats h;
	ax_sink_http_stats_get(ol->http, &h);
	copy_stats(&h, atomic_load(&ol->mapped), out);
}

void
ax_sink_ol_free(ax_sink_ol *ol, int64_t drain_us, ax_sink_ol_stats *final)
{
	ax_sink_http_stats h;

	if (ol == NULL)
		return;
	ax_sink_http_free(ol->http, drain_us, &h);
	if (final != NULL)
		copy_stats(&h, atomic_load(&ol->mapped), final);
	free(ol->ns);
	free(ol);
}
