/*
 * hist.h - a fixed-bucket latency histogram in microseconds, kept in the
 * memory of one thread, published as component_stats rows and rendered as
 * a Prometheus histogram.
 *
 * Role: axd's queue observes scheduling latencies (decision, environment
 * ready, end to end) in ax_hist values and publishes them in
 * component_stats (store_stats.h); ax-api reads the rows back into
 * ax_hist values and renders them on /metrics. Both sides share the
 * bucket bounds and the row keys below, so the two processes agree.
 *
 * Invariants: bucket[i] counts the values v with bounds[i-1] < v <=
 * bounds[i] (non-cumulative); n counts every value, those above the last
 * bound too (the +Inf bucket); sum_us is their sum. Observing is a few
 * comparisons and additions, no allocation, no lock: the owner's thread
 * only.
 */
#ifndef AX_HIST_H
#define AX_HIST_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define AX_HIST_NBOUNDS 18

/* Upper bounds of the buckets in microseconds, ascending: 1 ms .. 1 h. */
extern const int64_t ax_hist_bounds_us[AX_HIST_NBOUNDS];

typedef struct ax_hist {
	uint64_t bucket[AX_HIST_NBOUNDS]; /* non-cumulative */
	uint64_t n;                       /* all values (+Inf) */
	int64_t  sum_us;
} ax_hist;

/* Counts one value; a negative one (clocks of two hosts) counts as 0. */
void ax_hist_observe(ax_hist *h, int64_t us);

/*
 * Row keys of a histogram published under prefix (e.g. "lat.decision.P0"):
 * part 0..AX_HIST_NBOUNDS-1 are the buckets ("<prefix>.b<i>"),
 * AX_HIST_NBOUNDS the sum ("<prefix>.sum_us"), AX_HIST_NBOUNDS + 1 the
 * count ("<prefix>.count"). Writes the key into buf (len bytes, always
 * terminated) and returns the part's value in h.
 */
#define AX_HIST_PARTS (AX_HIST_NBOUNDS + 2)
int64_t ax_hist_key(const ax_hist *h, const char *prefix, int part, char *buf,
                    size_t len);

/*
 * The inverse: when key is "<prefix>.<part>" for one of the parts above,
 * stores v into that part of h and returns 1; else 0 (h untouched).
 */
int ax_hist_set(ax_hist *h, const char *prefix, const char *key, int64_t v);

/*
 * Appends one series of the Prometheus histogram family name (seconds):
 * name_bucket{labels,le="..."} cumulative for every bound and +Inf,
 * name_sum{labels} and name_count{labels}. labels is the label list
 * without braces (e.g. `channel="P0"`), already escaped.
 */
void ax_hist_render(ax_buf *b, const char *name, const char *labels,
                    const ax_hist *h);

#endif /* AX_HIST_H */
