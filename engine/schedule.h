/*
 * schedule.h - when a DAG runs: cron (+ time zone), fixed rate (`every`),
 * one instant (`at`) or never (API-triggered only), bounded by start and
 * end, with Airflow's data intervals.
 *
 * Role: the DAG model builds one ax_schedule per DAG version; the time
 * detector asks it for the next due time and, after a pause or restart,
 * which periods are due (ax_schedule_due, honouring catchup).
 *
 * Data intervals (as Airflow): a scheduled run covers the period
 * [previous fire, this fire); it becomes due at the period's end, and its
 * logical date (ds) is the period's start. A period exists when its start
 * is >= `start` and <= `end`. Kinds:
 *   cron   periods run from one fire time of the expression to the next;
 *          the first starts at the first fire time >= start.
 *   every  periods [a + k*every, a + (k+1)*every), k >= 0, anchored at
 *          a = start (at the Unix epoch when there is no start).
 *   at     one period [at, at], due at `at`.
 *   none   no period; every query is AX_ENOENT.
 *
 * Invariants: immutable after ax_schedule_new; thread-safe to query.
 * Instants are UTC microseconds.
 */
#ifndef AX_SCHEDULE_H
#define AX_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "cron.h"
#include "tz.h"

#define AX_SCHED_NO_START INT64_MIN
#define AX_SCHED_NO_END   INT64_MAX

/* Also declared, identically, by dag.h (see there). */
#ifndef AX_SCHED_KIND_DEFINED
#define AX_SCHED_KIND_DEFINED
typedef enum ax_sched_kind {
	AX_SCHED_NONE = 0,
	AX_SCHED_CRON,
	AX_SCHED_EVERY,
	AX_SCHED_AT,
} ax_sched_kind;
#endif

/* What to build; strings are copied, tz is borrowed (see below). */
typedef struct ax_sched_spec {
	ax_sched_kind kind;
	const char   *cron; /* CRON: the expression */
	const ax_tz  *tz;   /* CRON: zone, NULL = UTC; must outlive the
	                       schedule (take it from an ax_tz_cache) */
	int64_t every_us;   /* EVERY: period length, > 0 */
	int64_t at_us;      /* AT: the instant */
	int64_t start_us;   /* first period starts at/after; NO_START */
	int64_t end_us;     /* no period starts after; NO_END */
	int     catchup;    /* 1: run every missed period after a pause;
	                       0: only the latest */
} ax_sched_spec;

/* One data interval. */
typedef struct ax_period {
	int64_t start_us;   /* data_interval_start */
	int64_t end_us;     /* data_interval_end: the run is due here */
	int64_t logical_us; /* logical date (ds): == start_us */
} ax_period;

typedef struct ax_schedule ax_schedule;

/*
 * Builds a schedule. Errors: AX_EPARSE for a bad cron (err says where,
 * may be NULL), AX_EINVAL for every <= 0 or end < start. *out is owned
 * by the caller (ax_schedule_free).
 */
ax_err ax_schedule_new(const ax_sched_spec *spec, ax_schedule **out,
                       ax_cron_err *err);

void ax_schedule_free(ax_schedule *s);

ax_sched_kind ax_schedule_kind(const ax_schedule *s);
int           ax_schedule_catchup(const ax_schedule *s);

/* The first period whose end (due time) is strictly after after_us. */
ax_err ax_schedule_next_period(const ax_schedule *s, int64_t after_us,
                               ax_period *out);

/* The last period whose end is at or before at_us (the latest due). */
ax_err ax_schedule_latest_period(const ax_schedule *s, int64_t at_us,
                                 ax_period *out);

/* Due times: next strictly after, previous strictly before. ENOENT when
 * none. */
ax_err ax_schedule_next_fire(const ax_schedule *s, int64_t after_us,
                             int64_t *fire_us);
ax_err ax_schedule_prev_fire(const ax_schedule *s, int64_t before_us,
                             int64_t *fire_us);

/*
 * Lists the periods whose end is in (from_us, to_us], oldest first, at
 * most max of them into out. *n gets the count; *more (may be NULL) is 1
 * when further periods in the range were left out (ask again with from_us
 * = the last end). AX_OK with *n = 0 when there are none.
 */
ax_err ax_schedule_periods(const ax_schedule *s, int64_t from_us,
                           int64_t to_us, ax_period *out, size_t max,
                           size_t *n, int *more);

/*
 * What the time detector creates when it wakes at now_us and the last
 * period it created ended at last_end_us (AX_SCHED_NO_START when none
 * ever was): with catchup, every period ending in (last_end_us, now_us]
 * (bounded by max, *more as above); without catchup only the latest one
 * (a pause does not unleash a backlog; Airflow's catchup=False). *n may
 * be 0.
 */
ax_err ax_schedule_due(const ax_schedule *s, int64_t last_end_us,
                       int64_t now_us, ax_period *out, size_t max, size_t *n,
                       int *more);

#endif /* AX_SCHEDULE_H */
