/*
 * overlap.h - the overlap decision of the dependency detector: what
 * happens to a new run of a DAG that is ready to start (its upstream DAGs
 * met) while earlier runs of the DAG are active or held.
 *
 * A pure function (no I/O, no clock, no memory): the detector
 * (run_life.c) gathers the inputs from its DAG queue and applies the
 * answer. The rules, in order:
 *  1. A serial backfill run starts when no serial backfill run of the
 *     DAG is active, else it queues behind that run (in logical order).
 *  2. A parallel backfill run starts while the DAG has fewer than
 *     max_active_runs active runs, else it is held (never discarded, and
 *     it never replaces a run).
 *  3. Any other run starts while the DAG has fewer than max_active_runs
 *     active runs and none held.
 *  4. Else, under policy discard or replace, a run prepared ahead of its
 *     due instant (scheduler.prepare_ahead) is deferred: held until the
 *     instant, when it is judged again, as if it had not been prepared
 *     ahead (the active run may end in the meantime).
 *  5. Else by policy: discard - the new run is canceled
 *     (CONCURRENCY_BLOCKED); replace - the oldest active runs are
 *     superseded until one slot is free, and the new run starts; serial
 *     and parallel - the new run is held (CONCURRENCY_BLOCKED) and starts
 *     in logical order as runs finish.
 *
 * Why the policy exists: two runs of one DAG writing the same tables at
 * once corrupt each other's output, or pile up behind a slow one. A wrong
 * answer costs a lost period (discarded or superseded when it should have
 * waited) or an unbounded backlog (held when the DAG asked to drop).
 *
 * max_active_runs <= 0 counts as 1. Threads: any.
 */
#ifndef AX_OVERLAP_H
#define AX_OVERLAP_H

#include <stddef.h>
#include <stdint.h>

#include "dag.h"

/* What brought the run. */
typedef enum ax_run_kind {
	AX_RUN_KIND_DUE = 0,          /* a Due, or a run rebuilt unplanned */
	AX_RUN_KIND_BACKFILL_SERIAL,  /* backfill, one run at a time */
	AX_RUN_KIND_BACKFILL_PARALLEL /* backfill, up to max_active_runs */
} ax_run_kind;

/* The decision. */
typedef enum ax_overlap_act {
	AX_ACT_START = 0,      /* start now */
	AX_ACT_HOLD,           /* held by concurrency, started in order */
	AX_ACT_QUEUE_BACKFILL, /* queued behind the serial backfill run */
	AX_ACT_DEFER,          /* held until its due instant, then judged */
	AX_ACT_DISCARD,        /* canceled with CONCURRENCY_BLOCKED */
	AX_ACT_REPLACE,        /* supersede nsupersede oldest, then start */
} ax_overlap_act;

typedef struct ax_overlap_in {
	ax_overlap  policy;          /* the DAG's (dag.h) */
	int32_t     max_active_runs; /* the DAG's; <= 0 counts as 1 */
	ax_run_kind kind;
	size_t      nactive;         /* active runs of the DAG */
	size_t      nheld;           /* its runs held by concurrency */
	int64_t     oldest_active;   /* id of its oldest active run, 0 none */
	int64_t     backfill_active; /* its active serial backfill run, 0 */
	int         early; /* before its due instant, not judged at it yet */
} ax_overlap_in;

typedef struct ax_overlap_out {
	ax_overlap_act act;
	/* HOLD, DEFER: the oldest active run (0 when none is active: it
	 * waits behind runs held before it); QUEUE_BACKFILL: the active
	 * serial backfill run; else 0 */
	int64_t behind;
	size_t  nsupersede; /* REPLACE: oldest active runs to cancel */
} ax_overlap_out;

/* The decision for a new run, from in (see the file comment). */
ax_overlap_out ax_overlap_decide(const ax_overlap_in *in);

/* A stable name of act ("start", "hold", ...), "?" when out of range. */
const char *ax_overlap_act_name(ax_overlap_act act);

#endif /* AX_OVERLAP_H */
