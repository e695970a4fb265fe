/*
 * groups.c - where a task may run when its worker_group names several
 * groups ("gpu-a,gpu-b") or selects them by their workers' labels
 * ("gpu=a100"), for the resource detector (see resource_internal.h for
 * its files; the text is engine/group_spec.h's).
 *
 * Such items wait in one lane per (spec, pool, P0 or not), like those of
 * one group, so that the admission order stays one heap per lane. At
 * admission the lane's head goes to the candidate group where it fits
 * with the lowest score
 *
 *     cost x (100 + water level after admitting it, percent)
 *
 * cost being resources.group_cost (percent, 100 when not set) and the
 * water level the highest of its slots (against the admission limit),
 * its declared cpu and memory (against what the workers offer) and a
 * level pushed for the group (PUT /api/v1/pools/{name}/pressure). Equal
 * costs spread work to the emptiest group; a group of cost 150 takes
 * work once the others are half full or more, and a much higher cost
 * makes it an overflow group used only when the others are full. Equal
 * scores go to the group listed first. The Admission then names the
 * chosen group, and so do the instance row, the attempt and the queue.
 *
 * Candidates: a list's groups as named (before their first report they
 * get the cold-start default, as one group does); a selector's are the
 * groups with live workers whose common labels match (the queue reports
 * them per group), found again when groups or labels change
 * (rd_state.group_gen). A selector nothing matches blocks the item
 * ("WAIT_RESOURCE unoffered=worker_group") until a group matches.
 *
 * Cost: O(candidates) per look at a lane head; O(groups) per selector
 * lane when groups change.
 */
#include "resource_internal.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"

ax_err
axrd_lane_spec(rd_state *st, rd_lane *l, const char *text)
{
	if (!ax_group_spec_multi(text))
		return AX_OK;
	if ((l->spec = calloc(1, sizeof(*l->spec))) == NULL)
		return AX_ENOMEM;
	if (ax_group_spec_parse(text, l->spec) != AX_OK) {
		/* the DAG loader validated it: only a hand-made message;
		 * the lane stays one group of that text, which no worker
		 * serves */
		ax_logf(AX_LOG_WARN, COMP, "BAD_GROUP", NULL,
		        "worker_group '%s' not understood: %s", text,
		        ax_err_detail());
		free(l->spec);
		l->spec = NULL;
		return AX_OK;
	}
	l->cand_gen = st->group_gen - 1; /* found on first use */
	axrd_lane_cands(st, l);
	return AX_OK;
}

typedef struct cand_scan {
	rd_lane *l;
	size_t   cap;
} cand_scan;

static void
match_one(void *arg, const char *key, void *val)
{
	cand_scan *cs = arg;
	rd_group  *g  = val;
	(void) key;
	if (g->nlabels == 0 || (g->agg <= 0 && g->nworker == 0) ||
	    !ax_labels_match(cs->l->spec->labels, cs->l->spec->n, g->labels,
	                     g->nlabels) ||
	    cs->l->ncand >= cs->cap)
		return;
	cs->l->cand[cs->l->ncand++] = g;
}

static int
by_name(const void *a, const void *b)
{
	return strcmp((*(rd_group *const *) a)->name,
	              (*(rd_group *const *) b)->name);
}

void
axrd_lane_cands(rd_state *st, rd_lane *l)
{
	if (l->spec == NULL || l->cand_gen == st->group_gen)
		return;
	if (l->spec->kind == AX_GSPEC_ANY && l->cand != NULL)
		return; /* a list's groups do not change */
	size_t     cap = l->spec->kind == AX_GSPEC_ANY
	        ? l->spec->n
	        : ax_strmap_count(st->groups);
	rd_group **c   = calloc(cap > 0 ? cap : 1, sizeof(*c));
	if (c == NULL)
		return; /* the old ones stay; tried again next time */
	free(l->cand);
	l->cand     = c;
	l->ncand    = 0;
	l->cand_gen = st->group_gen;
	if (l->spec->kind == AX_GSPEC_ANY) {
		for (size_t i = 0; i < l->spec->n; i++) {
			rd_group *g = axrd_group_get(st, l->spec->names[i]);
			if (g != NULL)
				l->cand[l->ncand++] = g;
		}
		l->cand_gen = st->group_gen;
		return;
	}
	cand_scan cs = { .l = l, .cap = cap };
	ax_strmap_each(st->groups, match_one, &cs);
	qsort(l->cand, l->ncand, sizeof(*l->cand), by_name);
}

/* Percent of part in whole, after adding need (0 when whole is 0: not
 * reported, no limit). */
static int64_t
pct(int64_t used, int64_t need, int64_t whole)
{
	return whole > 0 ? (used + need) * 100 / whole : 0;
}

int
axrd_water_pct(const rd_state *st, const rd_lane *l, const rd_group *g,
               const rd_item *it)
{
	int64_t w = pct(g->used, it->slots, axrd_group_limit(st, g));
	int64_t c = pct(g->used_cpu, it->cpu,
	                g->agg >= 0 ? g->agg_cpu : g->workers_cpu);
	int64_t m = pct(g->used_mem, it->mem,
	                g->agg >= 0 ? g->agg_mem : g->workers_mem);
	int64_t p = axrd_group_level(st, g, l->pool, ax_clock_utc_us());
	if (c > w)
		w = c;
	if (m > w)
		w = m;
	if (p > w)
		w = p;
	return w > 1000 ? 1000 : (int) w;
}

/*
 * What keeps head it of lane l from its admission (axrd_lane_hold), or
 * NULL, and then *out is the group it goes to. When it is held, *out is
 * the group whose hold is returned (NULL: none has capacity).
 */
const char *
axrd_lane_pick(const rd_state *st, const rd_lane *l, const rd_item *it,
               rd_group **out)
{
	const char *first = NULL;
	rd_group   *best = NULL, *held = NULL;
	int64_t     best_score = 0;

	*out = NULL;
	if (l->spec == NULL) {
		*out = l->group;
		return axrd_group_hold(st, l, l->group, it);
	}
	for (size_t i = 0; i < l->ncand; i++) {
		rd_group   *g = l->cand[i];
		const char *h = axrd_group_hold(st, l, g, it);
		if (h != NULL) {
			if (first == NULL) {
				first = h;
				held  = g;
			}
			continue;
		}
		int64_t score = g->cost * (100 + axrd_water_pct(st, l, g, it));
		if (best == NULL || score < best_score) {
			best       = g;
			best_score = score;
		}
	}
	if (best != NULL) {
		*out = best;
		return NULL;
	}
	*out = held;
	return first != NULL ? first : "worker_group";
}
