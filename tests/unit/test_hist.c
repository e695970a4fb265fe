/*
 * test_hist.c - engine/hist.c: bucket edges, negative values, the row
 * keys and their inverse, and the Prometheus rendering (cumulative
 * buckets, +Inf, sum in seconds).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "hist.h"

Test(hist, bucket_edges_and_negative_values)
{
	ax_hist h = { 0 };

	ax_hist_observe(&h, 1000);         /* on the first bound: its bucket */
	ax_hist_observe(&h, 1001);         /* just above: the next */
	ax_hist_observe(&h, -5);           /* skewed clocks: 0 */
	ax_hist_observe(&h, 4000000000LL); /* above the last: +Inf only */
	cr_expect_eq(h.bucket[0], 2);
	cr_expect_eq(h.bucket[1], 1);
	cr_expect_eq(h.n, 4);
	cr_expect_eq(h.sum_us, 1000 + 1001 + 0 + 4000000000LL);
	uint64_t in = 0;
	for (int i = 0; i < AX_HIST_NBOUNDS; i++)
		in += h.bucket[i];
	cr_expect_eq(in, 3, "the value above the last bound is in no bucket");
	for (int i = 1; i < AX_HIST_NBOUNDS; i++)
		cr_expect_gt(ax_hist_bounds_us[i], ax_hist_bounds_us[i - 1]);
}

Test(hist, keys_round_trip)
{
	ax_hist h = { 0 }, back = { 0 };
	char    key[64];

	ax_hist_observe(&h, 30000);
	ax_hist_observe(&h, 7000000);
	for (int p = 0; p < AX_HIST_PARTS; p++) {
		int64_t v =
		    ax_hist_key(&h, "lat.decision.P0", p, key, sizeof(key));
		cr_expect_eq(ax_hist_set(&back, "lat.decision.P0", key, v), 1,
		             "%s", key);
		cr_expect_eq(ax_hist_set(&back, "lat.decision.Px", key, v), 0,
		             "%s is not a key of another prefix", key);
	}
	cr_expect(memcmp(&h, &back, sizeof(h)) == 0);
	ax_hist_key(&h, "p", 0, key, sizeof(key));
	cr_expect_str_eq(key, "p.b0");
	ax_hist_key(&h, "p", AX_HIST_NBOUNDS, key, sizeof(key));
	cr_expect_str_eq(key, "p.sum_us");
	ax_hist_key(&h, "p", AX_HIST_NBOUNDS + 1, key, sizeof(key));
	cr_expect_str_eq(key, "p.count");
	/* what is not one of its keys is refused */
	static const char *const bad[] = { "p",        "p.",    "p.b",
		                           "p.b18",    "p.b-1", "p.b1x",
		                           "p.bx",     "p.sum", "pp.b1",
		                           "p.count.x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(ax_hist_set(&back, "p", bad[i], 1), 0, "%s",
		             bad[i]);
}

Test(hist, renders_cumulative_buckets_in_seconds)
{
	ax_hist h = { 0 };
	ax_buf  b;

	ax_hist_observe(&h, 500);     /* <= 1 ms */
	ax_hist_observe(&h, 2000);    /* <= 2.5 ms */
	ax_hist_observe(&h, 2000000); /* <= 2.5 s */
	ax_buf_init(&b, 0);
	ax_hist_render(&b, "x_seconds", "channel=\"P0\"", &h);
	const char *s = ax_buf_str(&b);
	cr_expect(strstr(s,
	                 "x_seconds_bucket{channel=\"P0\",le=\"0.001\"} "
	                 "1\n") != NULL,
	          "%s", s);
	cr_expect(strstr(s,
	                 "x_seconds_bucket{channel=\"P0\",le=\"0.0025\"} "
	                 "2\n") != NULL,
	          "%s", s);
	cr_expect(strstr(s, "x_seconds_bucket{channel=\"P0\",le=\"1\"} 2\n") !=
	              NULL,
	          "%s", s);
	cr_expect(strstr(s,
	                 "x_seconds_bucket{channel=\"P0\",le=\"2.5\"} "
	                 "3\n") != NULL,
	          "%s", s);
	cr_expect(strstr(s,
	                 "x_seconds_bucket{channel=\"P0\",le=\"+Inf\"} "
	                 "3\n") != NULL,
	          "%s", s);
	cr_expect(strstr(s, "x_seconds_sum{channel=\"P0\"} 2.002500\n") !=
	              NULL,
	          "%s", s);
	cr_expect(strstr(s, "x_seconds_count{channel=\"P0\"} 3\n") != NULL,
	          "%s", s);
	ax_buf_fini(&b);
}
