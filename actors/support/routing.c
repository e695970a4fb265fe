/*
 * routing.c - routing strategies of the queue service (see routing.h).
 *
 * Pull semantics: a worker that pulls while work is queued for its group
 * takes that work; a strategy matters when several workers of a group are
 * waiting at once (work arrives at an idle group) and for sticky attempts,
 * which wait for their worker.
 */
#include "routing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "clock.h"
#include "hash.h"

struct ax_ring_point {
	uint64_t hash;
	size_t   id; /* index in ring->ids */
};

void
ax_routing_state_init(ax_routing_state *st)
{
	uint64_t seed = 0;
	st->rr_last   = UINT64_MAX;
	if (getrandom(&seed, sizeof(seed), 0) != (ssize_t) sizeof(seed))
		seed = (uint64_t) ax_clock_mono_us();
	st->rng = seed ? seed : 0x9e3779b97f4a7c15ULL;
}

/* round_robin: the waiting worker following the one chosen last in join
 * order, cyclically. */
static size_t
rr_choose(ax_routing_state *st, const ax_routing_cand *c, size_t n,
          const char *key)
{
	size_t best = SIZE_MAX, first = 0;
	for (size_t i = 0; i < n; i++) {
		if (c[i].ordinal < c[first].ordinal)
			first = i;
		if (st->rr_last != UINT64_MAX && c[i].ordinal > st->rr_last &&
		    (best == SIZE_MAX || c[i].ordinal < c[best].ordinal))
			best = i;
	}
	if (best == SIZE_MAX)
		best = first;
	st->rr_last = c[best].ordinal;
	return best;
}

static size_t
random_choose(ax_routing_state *st, const ax_routing_cand *c, size_t n,
              const char *key)
{
	uint64_t x = st->rng;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	st->rng = x;
	return (size_t) (x % n);
}

/* least_load: fewest used slots relative to the worker's slots, then the
 * lower host load average, then join order. */
static size_t
ll_choose(ax_routing_state *st, const ax_routing_cand *c, size_t n,
          const char *key)
{
	size_t best = 0;
	for (size_t i = 1; i < n; i++) {
		int64_t a = (int64_t) c[i].slots_used *
		    (c[best].slots_total > 0 ? c[best].slots_total : 1);
		int64_t b = (int64_t) c[best].slots_used *
		    (c[i].slots_total > 0 ? c[i].slots_total : 1);
		if (a < b || (a == b && c[i].load_x100 < c[best].load_x100) ||
		    (a == b && c[i].load_x100 == c[best].load_x100 &&
		     c[i].ordinal < c[best].ordinal))
			best = i;
	}
	return best;
}

/* failover: the first worker in join order that is waiting (the primary
 * while it is there, the next one when it is not). */
static size_t
fo_choose(ax_routing_state *st, const ax_routing_cand *c, size_t n,
          const char *key)
{
	size_t best = 0;
	for (size_t i = 1; i < n; i++)
		if (c[i].ordinal < c[best].ordinal)
			best = i;
	return best;
}

static const char *
ch_target(const ax_routing_ring *ring, const char *key, const char *pinned)
{
	return ax_routing_ring_lookup(ring, key ? key : "");
}

static const char *
pinned_target(const ax_routing_ring *ring, const char *key, const char *pinned)
{
	return pinned != NULL && *pinned ? pinned : NULL;
}

const ax_routing_ops ax_routing_round_robin = {
	.name   = "round_robin",
	.choose = rr_choose,
};
const ax_routing_ops ax_routing_random = {
	.name   = "random",
	.choose = random_choose,
};
const ax_routing_ops ax_routing_least_load = {
	.name   = "least_load",
	.choose = ll_choose,
};
const ax_routing_ops ax_routing_failover = {
	.name   = "failover",
	.choose = fo_choose,
};
const ax_routing_ops ax_routing_consistent_hash = {
	.name   = "consistent_hash",
	.sticky = 1,
	.target = ch_target,
};
const ax_routing_ops ax_routing_pinned = {
	.name   = "pinned",
	.sticky = 1,
	.target = pinned_target,
};

static const ax_routing_ops *const all_ops[] = {
	&ax_routing_round_robin,     &ax_routing_random,
	&ax_routing_least_load,      &ax_routing_failover,
	&ax_routing_consistent_hash, &ax_routing_pinned,
};

ax_err
ax_routing_find(const char *name, const ax_routing_ops **out)
{
	if (name == NULL || *name == '\0') {
		*out = &ax_routing_round_robin;
		return AX_OK;
	}
	for (size_t i = 0; i < sizeof(all_ops) / sizeof(all_ops[0]); i++)
		if (strcmp(all_ops[i]->name, name) == 0) {
			*out = all_ops[i];
			return AX_OK;
		}
	return ax_err_set(AX_EINVAL,
	                  "unknown routing strategy '%s'; use round_robin, "
	                  "random, least_load, failover, consistent_hash or "
	                  "pinned",
	                  name);
}

/* ----------------------------------------------------------------- ring */

static int
point_cmp(const void *a, const void *b)
{
	const struct ax_ring_point *x = a, *y = b;
	return (x->hash > y->hash) - (x->hash < y->hash);
}

static ax_err
ring_rebuild(ax_routing_ring *r)
{
	struct ax_ring_point *p = NULL;
	size_t                n = r->nids * AX_ROUTING_VNODES;

	if (n > 0 && (p = malloc(n * sizeof(*p))) == NULL)
		return ax_err_set(AX_ENOMEM, "routing ring of %zu points", n);
	for (size_t i = 0; i < r->nids; i++)
		for (size_t v = 0; v < AX_ROUTING_VNODES; v++) {
			/* vnode v of worker w hashes "w#v" */
			size_t len = strlen(r->ids[i]);
			char   buf[512];
			if (len > sizeof(buf) - 24)
				len = sizeof(buf) - 24;
			memcpy(buf, r->ids[i], len);
			buf[len] = '#';
			snprintf(buf + len + 1, 20, "%zu", v);
			p[i * AX_ROUTING_VNODES + v].hash = ax_hash_str(buf);
			p[i * AX_ROUTING_VNODES + v].id   = i;
		}
	if (n > 0)
		qsort(p, n, sizeof(*p), point_cmp);
	free(r->points);
	r->points  = p;
	r->npoints = n;
	return AX_OK;
}

void
ax_routing_ring_fini(ax_routing_ring *r)
{
	for (size_t i = 0; i < r->nids; i++)
		free(r->ids[i]);
	free(r->ids);
	free(r->points);
	memset(r, 0, sizeof(*r));
}

ax_err
ax_routing_ring_add(ax_routing_ring *r, const char *worker_id)
{
	char **v;
	for (size_t i = 0; i < r->nids; i++)
		if (strcmp(r->ids[i], worker_id) == 0)
			return AX_OK;
	if ((v = realloc(r->ids, (r->nids + 1) * sizeof(*v))) == NULL)
		return ax_err_set(AX_ENOMEM, "routing ring");
	r->ids = v;
	if ((r->ids[r->nids] = strdup(worker_id)) == NULL)
		return ax_err_set(AX_ENOMEM, "routing ring");
	r->nids++;
	return ring_rebuild(r);
}

ax_err
ax_routing_ring_remove(ax_routing_ring *r, const char *worker_id)
{
	for (size_t i = 0; i < r->nids; i++)
		if (strcmp(r->ids[i], worker_id) == 0) {
			free(r->ids[i]);
			r->ids[i] = r->ids[--r->nids];
			return ring_rebuild(r);
		}
	return AX_OK;
}

const char *
ax_routing_ring_lookup(const ax_routing_ring *r, const char *key)
{
	uint64_t h;
	size_t   lo = 0, hi;

	if (r->npoints == 0)
		return NULL;
	h  = ax_hash_str(key);
	hi = r->npoints;
	while (lo < hi) { /* first point with hash >= h */
		size_t mid = lo + (hi - lo) / 2;
		if (r->points[mid].hash < h)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == r->npoints)
		lo = 0;
	return r->ids[r->points[lo].id];
}
