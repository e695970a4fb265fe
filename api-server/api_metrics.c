/*
 * api_metrics.c - per-route request counters and latency histograms (see
 * api_metrics.h). Status codes are counted in a small fixed list of
 * slots; any other code lands in the slot of its class (e.g. 418 -> the
 * "4xx" slot) so the label set stays bounded whatever clients send.
 */
#include "api_metrics.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_routes.h"
#include "hist.h"
#include "store.h"

static const unsigned codes[] = { 200, 201, 202, 204, 400, 401, 403, 404,
	                          405, 409, 413, 415, 422, 500, 503 };
#define NCODES (sizeof(codes) / sizeof(codes[0]))
#define NSLOTS (NCODES + 5) /* + 1xx..5xx class slots */

static const double bounds[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
	                         0.25,  0.5,    1,     2.5,  5,     10 };
#define NBOUNDS (sizeof(bounds) / sizeof(bounds[0]))

typedef struct route_stats {
	uint64_t count[NSLOTS];
	uint64_t bucket[NBOUNDS]; /* non-cumulative */
	uint64_t n;
	double   sum; /* seconds */
} route_stats;

struct ax_api_metrics {
	pthread_mutex_t mu;
	size_t          nroutes; /* ax_api_routes_count + 1 (unmatched) */
	route_stats     stats[];
};

ax_err
ax_api_metrics_new(ax_api_metrics **out)
{
	size_t          n = ax_api_routes_count + 1;
	ax_api_metrics *m = calloc(1, sizeof(*m) + n * sizeof(route_stats));

	if (m == NULL)
		return ax_err_set(AX_ENOMEM, "metrics");
	pthread_mutex_init(&m->mu, NULL);
	m->nroutes = n;
	*out       = m;
	return AX_OK;
}

void
ax_api_metrics_free(ax_api_metrics *m)
{
	if (m == NULL)
		return;
	pthread_mutex_destroy(&m->mu);
	free(m);
}

static size_t
slot_of(unsigned status)
{
	for (size_t i = 0; i < NCODES; i++)
		if (codes[i] == status)
			return i;
	unsigned cls = status / 100;
	if (cls < 1 || cls > 5)
		cls = 5;
	return NCODES + cls - 1;
}

void
ax_api_metrics_record(ax_api_metrics *m, int route, unsigned status,
                      int64_t dur_us)
{
	size_t r = (route < 0 || (size_t) route >= ax_api_routes_count)
	    ? ax_api_routes_count
	    : (size_t) route;
	double s = (double) (dur_us < 0 ? 0 : dur_us) / 1e6;
	size_t b = 0;

	while (b < NBOUNDS && s > bounds[b])
		b++;
	pthread_mutex_lock(&m->mu);
	route_stats *st = &m->stats[r];
	st->count[slot_of(status)]++;
	if (b < NBOUNDS)
		st->bucket[b]++;
	st->n++;
	st->sum += s;
	pthread_mutex_unlock(&m->mu);
}

static void
labels(size_t r, char *buf, size_t len)
{
	if (r >= ax_api_routes_count)
		snprintf(buf, len, "method=\"any\",route=\"unmatched\"");
	else
		snprintf(buf, len, "method=\"%s\",route=\"%s\"",
		         ax_api_routes[r].method, ax_api_routes[r].pattern);
}

void
ax_api_metrics_render(ax_api_metrics *m, ax_buf *b)
{
	static const char *const cls[] = { "1xx", "2xx", "3xx", "4xx", "5xx" };
	route_stats             *copy  = malloc(m->nroutes * sizeof(*copy));
	char                     lab[200];

	if (copy == NULL) {
		ax_buf_set_err(b, AX_ENOMEM);
		return;
	}
	pthread_mutex_lock(&m->mu);
	memcpy(copy, m->stats, m->nroutes * sizeof(*copy));
	pthread_mutex_unlock(&m->mu);

	ax_buf_printf(b,
	              "# HELP ax_api_requests_total HTTP requests "
	              "answered, by route and status code.\n"
	              "# TYPE ax_api_requests_total counter\n");
	for (size_t r = 0; r < m->nroutes; r++) {
		labels(r, lab, sizeof(lab));
		for (size_t k = 0; k < NSLOTS; k++) {
			if (copy[r].count[k] == 0)
				continue;
			char code[8];
			if (k < NCODES)
				snprintf(code, sizeof(code), "%u", codes[k]);
			else
				snprintf(code, sizeof(code), "%s",
				         cls[k - NCODES]);
			ax_buf_printf(
			    b, "ax_api_requests_total{%s,code=\"%s\"} %llu\n",
			    lab, code, (unsigned long long) copy[r].count[k]);
		}
	}
	ax_buf_printf(b,
	              "# HELP ax_api_request_duration_seconds Time from "
	              "request to answer, by route.\n"
	              "# TYPE ax_api_request_duration_seconds "
	              "histogram\n");
	for (size_t r = 0; r < m->nroutes; r++) {
		uint64_t cum = 0;
		if (copy[r].n == 0)
			continue;
		labels(r, lab, sizeof(lab));
		for (size_t k = 0; k < NBOUNDS; k++) {
			cum += copy[r].bucket[k];
			ax_buf_printf(b,
			              "ax_api_request_duration_seconds_"
			              "bucket{%s,le=\"%g\"} %llu\n",
			              lab, bounds[k],
			              (unsigned long long) cum);
		}
		ax_buf_printf(
		    b,
		    "ax_api_request_duration_seconds_bucket{%s,le=\"+Inf\"} "
		    "%llu\n"
		    "ax_api_request_duration_seconds_sum{%s} %.6f\n"
		    "ax_api_request_duration_seconds_count{%s} %llu\n",
		    lab, (unsigned long long) copy[r].n, lab, copy[r].sum, lab,
		    (unsigned long long) copy[r].n);
	}
	free(copy);
}

/* One family of ax_event_sink_*: rows whose key is `key` (or starts with
 * `prefix`, the rest being the reason label). */
static void
sink_family(PGresult *res, ax_buf *b, const char *name, const char *help,
            const char *key, const char *prefix)
{
	int    head = 0;
	size_t pl   = prefix != NULL ? strlen(prefix) : 0;

	for (int i = 0; i < PQntuples(res); i++) {
		const char *comp =
		    PQgetvalue(res, i, 0) + strlen("event_sink.");
		const char *k = PQgetvalue(res, i, 1);
		const char *v = PQgetvalue(res, i, 2);
		if (key != NULL ? strcmp(k, key) != 0 : strncmp(k, prefix, pl))
			continue;
		if (!head++)
			ax_buf_printf(b, "# HELP %s %s\n# TYPE %s counter\n",
			              name, help, name);
		if (key != NULL)
			ax_buf_printf(b, "%s{sink=\"%s\"} %s\n", name, comp,
			              v);
		else
			ax_buf_printf(b, "%s{sink=\"%s\",reason=\"%s\"} %s\n",
			              name, comp, k + pl, v);
	}
}

ax_err
ax_api_metrics_render_sinks(struct ax_store *st, ax_buf *b)
{
	PGresult *res;
	/* component and key are written by axd only (fixed identifiers),
	 * but keep the label values safe for the exposition format anyway */
	ax_err rv = ax_store_query(
	    st,
	    "SELECT component, key, value FROM component_stats WHERE "
	    "component LIKE 'event\\_sink.%' AND component ~ "
	    "'^[a-z_.]+$' AND key ~ '^[a-z_.]+$' ORDER BY component, key",
	    0, NULL, &res);

	if (rv != AX_OK)
		return rv;
	sink_family(res, b, "ax_event_sink_delivered_total",
	            "Events an event sink of axd delivered (event_log rows, "
	            "PUB messages, OpenLineage POSTs answered 2xx).",
	            "delivered", NULL);
	sink_family(res, b, "ax_event_sink_retries_total",
	            "Deliveries an event sink of axd repeated after a "
	            "failure.",
	            "retries", NULL);
	sink_family(res, b, "ax_event_sink_dropped_total",
	            "Events an event sink of axd dropped, by reason "
	            "(buffer_full, undeliverable, rejected, send_failed, "
	            "refused: refused by event_log and by "
	            "event_dead_letter).",
	            NULL, "dropped.");
	sink_family(res, b, "ax_events_dead_lettered_total",
	            "Events event_log refused for their content, kept in the "
	            "table event_dead_letter (envelope and error).",
	            "dead_lettered", NULL);
	PQclear(res);
	return AX_OK;
}

ax_err
ax_api_metrics_render_starving(struct ax_store *st, ax_buf *b)
{
	static const char *const tiers[]     = { "P0", "P1", "P2", "P3" };
	long long                starving[4] = { 0 }, waiting = 0;
	PGresult                *res;
	ax_err                   rv =
	    ax_store_query(st,
	                   "SELECT key, value FROM component_stats WHERE "
	                   "component = 'resource_detector'",
	                   0, NULL, &res);

	if (rv != AX_OK)
		return rv;
	for (int i = 0; i < PQntuples(res); i++) {
		const char *k = PQgetvalue(res, i, 0);
		long long   v = strtoll(PQgetvalue(res, i, 1), NULL, 10);
		if (strcmp(k, "waiting") == 0)
			waiting = v;
		for (int t = 0; t < 4; t++)
			if (strncmp(k, "starving.", 9) == 0 &&
			    strcmp(k + 9, tiers[t]) == 0)
				starving[t] = v;
	}
	PQclear(res);
	ax_buf_printf(b,
	              "# HELP ax_instances_starving Instances waiting for "
	              "admission longer than scheduler.starvation_after, by "
	              "tier (counted by axd's resource detector).\n"
	              "# TYPE ax_instances_starving gauge\n");
	for (int t = 0; t < 4; t++)
		ax_buf_printf(b, "ax_instances_starving{tier=\"%s\"} %lld\n",
		              tiers[t], starving[t]);
	ax_buf_printf(b,
	              "# HELP ax_instances_waiting_admission Instances "
	              "waiting for worker-group or pool capacity in axd's "
	              "resource detector.\n"
	              "# TYPE ax_instances_waiting_admission gauge\n"
	              "ax_instances_waiting_admission %lld\n",
	              waiting);
	return AX_OK;
}

/* ------------------------------------------------- scheduling metrics */

static const char *const sched_channels[] = { "P0", "Px", "k8s", "biz" };
#define NCH (sizeof(sched_channels) / sizeof(sched_channels[0]))

/* The latency families: component_stats key part, metric, help. */
static const struct {
	const char *key, *name, *help;
} lat_families[] = {
	{ "decision", "ax_scheduling_decision_seconds",
	  "Scheduling decision time: dispatched - due, per attempt at its "
	  "first start, by channel." },
	{ "env_ready", "ax_scheduling_env_ready_seconds",
	  "Environment ready time: started - dispatched (the worker's fork "
	  "or container start), by channel." },
	{ "e2e", "ax_scheduling_end_to_end_seconds",
	  "Scheduling latency end to end: started - due, by channel." },
};
#define NLAT (sizeof(lat_families) / sizeof(lat_families[0]))

/* Appends s as a label value (backslash, quote and newline escaped). */
static void
label_value(ax_buf *b, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			ax_buf_printf(b, "\\\\");
		else if (*s == '"')
			ax_buf_printf(b, "\\\"");
		else if (*s == '\n')
			ax_buf_printf(b, "\\n");
		else
			ax_buf_printf(b, "%c", *s);
	}
}

static int
channel_of(const char *s, size_t len)
{
	for (size_t c = 0; c < NCH; c++)
		if (strlen(sched_channels[c]) == len &&
		    strncmp(s, sched_channels[c], len) == 0)
			return (int) c;
	return -1;
}

static void
render_latency(PGresult *res, ax_buf *b)
{
	ax_hist h[NLAT][NCH];
	char    pre[64], lab[32];

	memset(h, 0, sizeof(h));
	for (int i = 0; i < PQntuples(res); i++) {
		const char *k = PQgetvalue(res, i, 1);
		long long   v = strtoll(PQgetvalue(res, i, 2), NULL, 10);
		if (strcmp(PQgetvalue(res, i, 0), "queue") != 0 ||
		    strncmp(k, "lat.", 4) != 0)
			continue;
		for (size_t f = 0; f < NLAT; f++)
			for (size_t c = 0; c < NCH; c++) {
				snprintf(pre, sizeof(pre), "lat.%s.%s",
				         lat_families[f].key,
				         sched_channels[c]);
				(void) ax_hist_set(&h[f][c], pre, k, v);
			}
	}
	for (size_t f = 0; f < NLAT; f++) {
		ax_buf_printf(b, "# HELP %s %s\n# TYPE %s histogram\n",
		              lat_families[f].name, lat_families[f].help,
		              lat_families[f].name);
		for (size_t c = 0; c < NCH; c++) {
			snprintf(lab, sizeof(lab), "channel=\"%s\"",
			         sched_channels[c]);
			ax_hist_render(b, lat_families[f].name, lab, &h[f][c]);
		}
	}
}

/* ax_queue_depth{channel,group} from the keys depth.<channel>.<group>. */
static void
render_depth(PGresult *res, ax_buf *b)
{
	ax_buf_printf(b,
	              "# HELP ax_queue_depth Attempts queued in axd's queue "
	              "service (rendered, waiting for a worker's pull), by "
	              "channel and worker group.\n"
	              "# TYPE ax_queue_depth gauge\n");
	for (int i = 0; i < PQntuples(res); i++) {
		const char *k = PQgetvalue(res, i, 1), *dot;
		if (strcmp(PQgetvalue(res, i, 0), "queue") != 0 ||
		    strncmp(k, "depth.", 6) != 0 ||
		    (dot = strchr(k + 6, '.')) == NULL ||
		    channel_of(k + 6, (size_t) (dot - (k + 6))) < 0)
			continue;
		ax_buf_printf(b, "ax_queue_depth{channel=\"%.*s\",group=\"",
		              (int) (dot - (k + 6)), k + 6);
		label_value(b, dot + 1);
		ax_buf_printf(b, "\"} %s\n", PQgetvalue(res, i, 2));
	}
}

/* ax_worker_slots{group,kind} from slots_used.<group> / slots_free.<g>. */
static void
render_slots(PGresult *res, ax_buf *b)
{
	ax_buf_printf(b,
	              "# HELP ax_worker_slots Slots of live workers, used and "
	              "free, by worker group (axd's queue service).\n"
	              "# TYPE ax_worker_slots gauge\n");
	for (int i = 0; i < PQntuples(res); i++) {
		const char *k = PQgetvalue(res, i, 1), *kind = NULL;
		if (strcmp(PQgetvalue(res, i, 0), "queue") != 0)
			continue;
		if (strncmp(k, "slots_used.", 11) == 0)
			kind = "used";
		else if (strncmp(k, "slots_free.", 11) == 0)
			kind = "free";
		if (kind == NULL || k[11] == '\0')
			continue;
		ax_buf_printf(b, "ax_worker_slots{group=\"");
		label_value(b, k + 11);
		ax_buf_printf(b, "\",kind=\"%s\"} %s\n", kind,
		              PQgetvalue(res, i, 2));
	}
}

/* The value of component comp's key, 0 when absent. */
static long long
stat_of(PGresult *res, const char *comp, const char *key)
{
	for (int i = 0; i < PQntuples(res); i++)
		if (strcmp(PQgetvalue(res, i, 0), comp) == 0 &&
		    strcmp(PQgetvalue(res, i, 1), key) == 0)
			return strtoll(PQgetvalue(res, i, 2), NULL, 10);
	return 0;
}

ax_err
ax_api_metrics_render_sched(struct ax_store *st, ax_buf *b)
{
	static const char *const fin[] = { "SUCCESS", "FAILED", "TIMEOUT",
		                           "CANCELED" };
	PGresult                *res;
	char                     key[64];
	ax_err                   rv = ax_store_query(
	                      st,
	                      "SELECT component, key, value FROM component_stats WHERE "
	                                        "component IN ('queue', 'result_handler') ORDER BY component, "
	                                        "key",
	                      0, NULL, &res);

	if (rv != AX_OK)
		return rv;
	render_latency(res, b);
	render_depth(res, b);
	render_slots(res, b);
	ax_buf_printf(b,
	              "# HELP ax_worker_heartbeat_losses_total Workers whose "
	              "lease lapsed without a heartbeat (their attempts went "
	              "UNKNOWN).\n"
	              "# TYPE ax_worker_heartbeat_losses_total counter\n"
	              "ax_worker_heartbeat_losses_total %lld\n",
	              stat_of(res, "queue", "lease_losses"));
	ax_buf_printf(b,
	              "# HELP ax_instances_finished_total Task instances "
	              "that reached a final state, by state (committed by "
	              "axd's result handler; a retried failure is counted "
	              "in ax_instance_retries_total instead).\n"
	              "# TYPE ax_instances_finished_total counter\n");
	for (size_t i = 0; i < sizeof(fin) / sizeof(fin[0]); i++) {
		snprintf(key, sizeof(key), "finished.%s", fin[i]);
		ax_buf_printf(b,
		              "ax_instances_finished_total{state=\"%s\"} "
		              "%lld\n",
		              fin[i], stat_of(res, "result_handler", key));
	}
	ax_buf_printf(b,
	              "# HELP ax_instance_retries_total Retries scheduled "
	              "after a failed, timed out or lost attempt.\n"
	              "# TYPE ax_instance_retries_total counter\n"
	              "ax_instance_retries_total %lld\n",
	              stat_of(res, "result_handler", "retries"));
	PQclear(res);
	return AX_OK;
}
