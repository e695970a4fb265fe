/*
 * hist.c - fixed-bucket latency histograms (see hist.h).
 *
 * The bounds span 1 ms to 1 h: a decision is milliseconds when a slot is
 * free and minutes when the instance waits for one; an environment is
 * ready in milliseconds for a local fork and in minutes for an image
 * pull. Eighteen buckets keep both ends readable in one family.
 */
#include "hist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const int64_t ax_hist_bounds_us[AX_HIST_NBOUNDS] = {
	1000,     2500,     5000,     10000,     25000,     50000,
	100000,   250000,   500000,   1000000,   2500000,   5000000,
	10000000, 30000000, 60000000, 300000000, 900000000, 3600000000LL,
};

void
ax_hist_observe(ax_hist *h, int64_t us)
{
	size_t i = 0;

	if (us < 0)
		us = 0;
	while (i < AX_HIST_NBOUNDS && us > ax_hist_bounds_us[i])
		i++;
	if (i < AX_HIST_NBOUNDS)
		h->bucket[i]++;
	h->n++;
	h->sum_us += us;
}

int64_t
ax_hist_key(const ax_hist *h, const char *prefix, int part, char *buf,
            size_t len)
{
	if (part < AX_HIST_NBOUNDS) {
		snprintf(buf, len, "%s.b%d", prefix, part);
		return (int64_t) h->bucket[part];
	}
	if (part == AX_HIST_NBOUNDS) {
		snprintf(buf, len, "%s.sum_us", prefix);
		return h->sum_us;
	}
	snprintf(buf, len, "%s.count", prefix);
	return (int64_t) h->n;
}

int
ax_hist_set(ax_hist *h, const char *prefix, const char *key, int64_t v)
{
	size_t pl = strlen(prefix);
	char  *end;
	long   i;

	if (strncmp(key, prefix, pl) != 0 || key[pl] != '.')
		return 0;
	key += pl + 1;
	if (strcmp(key, "sum_us") == 0) {
		h->sum_us = v;
		return 1;
	}
	if (strcmp(key, "count") == 0) {
		h->n = v < 0 ? 0 : (uint64_t) v;
		return 1;
	}
	if (key[0] != 'b' || key[1] < '0' || key[1] > '9')
		return 0;
	i = strtol(key + 1, &end, 10);
	if (*end != '\0' || i < 0 || i >= AX_HIST_NBOUNDS)
		return 0;
	h->bucket[i] = v < 0 ? 0 : (uint64_t) v;
	return 1;
}

void
ax_hist_render(ax_buf *b, const char *name, const char *labels,
               const ax_hist *h)
{
	uint64_t cum = 0;

	for (int i = 0; i < AX_HIST_NBOUNDS; i++) {
		cum += h->bucket[i];
		ax_buf_printf(b, "%s_bucket{%s,le=\"%g\"} %llu\n", name,
		              labels, (double) ax_hist_bounds_us[i] / 1e6,
		              (unsigned long long) cum);
	}
	/* a count published apart from its buckets never goes below them:
	 * Prometheus needs +Inf >= every bucket */
	ax_buf_printf(b,
	              "%s_bucket{%s,le=\"+Inf\"} %llu\n%s_sum{%s} %.6f\n"
	              "%s_count{%s} %llu\n",
	              name, labels,
	              (unsigned long long) (h->n > cum ? h->n : cum), name,
	              labels, (double) h->sum_us / 1e6, name, labels,
	              (unsigned long long) (h->n > cum ? h->n : cum));
}
