/*
 * overlap.c - the overlap decision (see overlap.h): pure, no I/O.
 */
#include "overlap.h"

ax_overlap_out
ax_overlap_decide(const ax_overlap_in *in)
{
	ax_overlap_out out = { .act = AX_ACT_START };
	size_t         max =
            in->max_active_runs > 0 ? (size_t) in->max_active_runs : 1;

	if (in->kind == AX_RUN_KIND_BACKFILL_SERIAL) {
		if (in->backfill_active != 0) {
			out.act    = AX_ACT_QUEUE_BACKFILL;
			out.behind = in->backfill_active;
		}
		return out;
	}
	if (in->kind == AX_RUN_KIND_BACKFILL_PARALLEL) {
		if (in->nactive >= max) {
			out.act    = AX_ACT_HOLD;
			out.behind = in->oldest_active;
		}
		return out;
	}
	if (in->nactive < max && in->nheld == 0)
		return out;
	switch (in->policy) {
	case AX_OVERLAP_DISCARD:
	case AX_OVERLAP_REPLACE:
		if (in->early) {
			out.act    = AX_ACT_DEFER;
			out.behind = in->oldest_active;
		} else if (in->policy == AX_OVERLAP_DISCARD)
			out.act = AX_ACT_DISCARD;
		else {
			out.act = AX_ACT_REPLACE;
			out.nsupersede =
			    in->nactive >= max ? in->nactive - max + 1 : 0;
		}
		return out;
	default:
		out.act    = AX_ACT_HOLD;
		out.behind = in->oldest_active;
		return out;
	}
}

const char *
ax_overlap_act_name(ax_overlap_act act)
{
	static const char *const names[] = {
		[AX_ACT_START]          = "start",
		[AX_ACT_HOLD]           = "hold",
		[AX_ACT_QUEUE_BACKFILL] = "queue_backfill",
		[AX_ACT_DEFER]          = "defer",
		[AX_ACT_DISCARD]        = "discard",
		[AX_ACT_REPLACE]        = "replace",
	};

	if ((unsigned) act >= sizeof(names) / sizeof(names[0]))
		return "?";
	return names[act];
}
