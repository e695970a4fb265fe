/*
 * queue_stats.c - the queue's metrics, counted in memory and published
 * in component_stats (component "queue") for ax-api's /metrics.
 *
 * What: scheduling latency histograms per channel, split into decision
 * (dispatched - due: the scheduler's own time; 0 for an attempt sent
 * ahead of its instant), environment ready (started - dispatched, or
 * started - due when sent ahead: the worker's fork, or an image pull)
 * and end to end (started - due), observed once per attempt at its first
 * STARTED;
 * queue depth per worker group and channel; worker slots used and free
 * per group (live workers); lease losses (workers whose heartbeats
 * stopped).
 *
 * Cost: an observation is a few comparisons on the queue's thread. The
 * publication runs at most once per AXQ_STATS_US from the timers, walks
 * the groups and the few attempts outside the channel heaps (unrouted,
 * pinned), and upserts only the rows whose value changed since the last
 * publication (all of them the first time, which also overwrites what a
 * previous life of axd left): one statement, none when nothing changed.
 * A failed publication is logged at debug level and tried again next
 * period; nothing on the dispatch path waits for it.
 */
#include "queue_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "store_stats.h"

#define KEY_MAX 200

static const char *const ch_names[AX_QUEUE_NCHANNELS] = { "P0", "Px", "k8s",
	                                                  "biz" };
static const char *const lat_names[AXQ_LAT_KINDS] = { "decision", "env_ready",
	                                              "e2e" };

void
axq_lat_observe(ax_queue *q, const qatt *a, int64_t started_at)
{
	int64_t due = a->ar != NULL ? a->ar->due_at_us : 0;
	int64_t dsp = a->dispatched_at_us;

	if (a->ch < 0 || a->ch >= AX_QUEUE_NCHANNELS || due <= 0 || dsp <= 0 ||
	    started_at <= 0)
		return;
	/* an attempt sent ahead of its instant waits on the worker until
	 * due: no decision time, and its environment counts from the
	 * instant, so decision + environment = end to end either way */
	ax_hist_observe(&q->lat[AXQ_LAT_DECISION][a->ch], dsp - due);
	ax_hist_observe(&q->lat[AXQ_LAT_ENV_READY][a->ch],
	                started_at - (dsp > due ? dsp : due));
	ax_hist_observe(&q->lat[AXQ_LAT_E2E][a->ch], started_at - due);
}

/* The rows of one publication: keys live in keys[] (KEY_MAX each). */
typedef struct pub {
	ax_store_stat *rows;
	char          *keys;
	size_t         n, cap;
} pub;

static void
pub_add(pub *p, const char *key, int64_t v)
{
	if (p->n == p->cap)
		return; /* sized by the caller; never reached */
	char *k = p->keys + p->n * KEY_MAX;
	snprintf(k, KEY_MAX, "%s", key);
	p->rows[p->n++] =
	    (ax_store_stat) { .component = AX_A_QUEUE, .key = k, .value = v };
}

/* Depth of every group and channel: the channel heaps, plus attempts
 * waiting outside them (unrouted, pinned to one worker), by channel. */
static void
group_depths(ax_queue *q, int64_t (*depth)[AX_QUEUE_NCHANNELS],
             qgroup **groups, size_t ng)
{
	ax_hmap_iter it;
	qworker     *w;

	for (size_t i = 0; i < ng; i++) {
		qgroup *g = groups[i];
		for (int ch = 0; ch < AX_QUEUE_NCHANNELS; ch++)
			depth[i][ch] = (int64_t) g->heaps[ch].n;
		for (size_t k = 0; k < g->unrouted.n; k++) {
			qatt *a = axq_heap_at(&g->unrouted, k);
			if (a->ch >= 0 && a->ch < AX_QUEUE_NCHANNELS)
				depth[i][a->ch]++;
		}
	}
	ax_hmap_iter_init(&it, &q->workers);
	while ((w = ax_hmap_iter_next(&it)) != NULL) {
		if (w->group == NULL)
			continue;
		for (size_t i = 0; i < ng; i++) {
			if (groups[i] != w->group)
				continue;
			for (size_t k = 0; k < w->personal.n; k++) {
				qatt *a = axq_heap_at(&w->personal, k);
				if (a->ch >= 0 && a->ch < AX_QUEUE_NCHANNELS)
					depth[i][a->ch]++;
			}
			break;
		}
	}
}

/* Slots of g's live workers: used, and free (never below 0). */
static void
group_slots(const qgroup *g, int64_t *used, int64_t *fr)
{
	int64_t u = 0, slots = 0;

	for (ax_list_node *n = g->members.head; n != NULL; n = n->next) {
		const qworker *w = QWORKER(n, gn);
		if (!w->alive)
			continue;
		slots += w->slots;
		u += w->used;
	}
	*used = u;
	*fr   = slots > u ? slots - u : 0;
}

/* Adds the rows of the groups (depth, slots) that changed. */
static void
add_groups(ax_queue *q, pub *p, qgroup **groups, size_t ng,
           int64_t (*depth)[AX_QUEUE_NCHANNELS])
{
	char key[KEY_MAX];

	group_depths(q, depth, groups, ng);
	for (size_t i = 0; i < ng; i++) {
		qgroup *g = groups[i];
		int64_t used, fr;
		int     all = !g->pub_ok || !q->stats_written;
		group_slots(g, &used, &fr);
		for (int ch = 0; ch < AX_QUEUE_NCHANNELS; ch++) {
			if (!all && depth[i][ch] == g->pub_depth[ch])
				continue;
			snprintf(key, sizeof(key), "depth.%s.%s", ch_names[ch],
			         g->name);
			pub_add(p, key, depth[i][ch]);
		}
		if (all || used != g->pub_used) {
			snprintf(key, sizeof(key), "slots_used.%s", g->name);
			pub_add(p, key, used);
		}
		if (all || fr != g->pub_free) {
			snprintf(key, sizeof(key), "slots_free.%s", g->name);
			pub_add(p, key, fr);
		}
	}
}

/* Adds the histogram parts that changed. */
static void
add_latency(ax_queue *q, pub *p)
{
	char pre[64], key[KEY_MAX];

	for (int k = 0; k < AXQ_LAT_KINDS; k++) {
		for (int ch = 0; ch < AX_QUEUE_NCHANNELS; ch++) {
			const ax_hist *h = &q->lat[k][ch];
			const ax_hist *o = &q->lat_pub[k][ch];
			snprintf(pre, sizeof(pre), "lat.%s.%s", lat_names[k],
			         ch_names[ch]);
			for (int part = 0; part < AX_HIST_PARTS; part++) {
				int64_t v   = ax_hist_key(h, pre, part, key,
				                          sizeof(key));
				int64_t was = ax_hist_key(o, pre, part, key,
				                          sizeof(key));
				if (q->stats_written && v == was)
					continue;
				pub_add(p, key, v);
			}
		}
	}
}

/* After a successful write: what was written is the new baseline. */
static void
commit_pub(ax_queue *q, qgroup **groups, size_t ng,
           int64_t (*depth)[AX_QUEUE_NCHANNELS], int64_t losses)
{
	memcpy(q->lat_pub, q->lat, sizeof(q->lat));
	q->pub_lease_losses = losses;
	for (size_t i = 0; i < ng; i++) {
		qgroup *g = groups[i];
		memcpy(g->pub_depth, depth[i], sizeof(g->pub_depth));
		group_slots(g, &g->pub_used, &g->pub_free);
		g->pub_ok = 1;
	}
	q->stats_written = 1;
}

int64_t
axq_stats_publish(ax_queue *q, int64_t now)
{
	size_t   ng = 0, cap;
	qgroup **groups;
	int64_t(*depth)[AX_QUEUE_NCHANNELS];
	pub          p      = { 0 };
	int64_t      losses = (int64_t) atomic_load(&q->st_lease_losses);
	ax_hmap_iter it;
	qgroup      *g;

	if (q->store == NULL)
		return INT64_MAX;
	if (now < q->stats_due)
		return q->stats_due;
	q->stats_due = now + AXQ_STATS_US;
	if (now < q->db_down_until)
		return q->stats_due;
	ng     = ax_hmap_count(&q->groups);
	groups = calloc(ng + 1, sizeof(*groups));
	depth  = calloc(ng + 1, sizeof(*depth));
	cap    = ng * (AX_QUEUE_NCHANNELS + 2) +
	    AXQ_LAT_KINDS * AX_QUEUE_NCHANNELS * AX_HIST_PARTS + 1;
	p.rows = calloc(cap, sizeof(*p.rows));
	p.keys = malloc(cap * KEY_MAX);
	p.cap  = cap;
	if (groups == NULL || depth == NULL || p.rows == NULL ||
	    p.keys == NULL)
		goto out;
	ng = 0;
	ax_hmap_iter_init(&it, &q->groups);
	while ((g = ax_hmap_iter_next(&it)) != NULL &&
	       ng < ax_hmap_count(&q->groups))
		groups[ng++] = g;
	add_groups(q, &p, groups, ng, depth);
	add_latency(q, &p);
	if (!q->stats_written || losses != q->pub_lease_losses)
		pub_add(&p, "lease_losses", losses);
	if (p.n > 0 && ax_store_stats_put(q->store, p.rows, p.n) != AX_OK) {
		ax_logf(AX_LOG_DEBUG, AX_A_QUEUE, NULL, NULL,
		        "component_stats not written: %s", ax_err_detail());
		goto out;
	}
	commit_pub(q, groups, ng, depth, losses);
out:
	free(groups);
	free(depth);
	free(p.rows);
	free(p.keys);
	return q->stats_due;
}
