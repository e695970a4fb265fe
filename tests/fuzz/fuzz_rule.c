/*
 * fuzz_rule.c - libFuzzer target for the Allow/Block rule parser
 * (engine/rule.c): the function ax-api validates every POST
 * /api/v1/rules body with and axd parses every stored rule with.
 *
 * Checked on every input: a refusal has a non-empty detail that is valid
 * UTF-8 (so the 400 answer can carry it); an accepted rule has the
 * ranges the decision relies on (a window of two distinct times of day,
 * priorities within 0..100, at least one match member), and deciding it
 * against a target at instants across the whole range (window, DST,
 * expiry) neither crashes nor reads out of bounds. Never a leak or UB.
 *
 * Run: build with the `fuzz` feature (clang), then
 *   build/tests/fuzz/fuzz_rule -max_total_time=20 tests/fuzz/corpus_rule
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rule.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int64_t at[]   = { INT64_MIN / 2,      -1, 0,
		                        1773000000000000LL, /* 2026-03 */
		                        1793000000000000LL, /* 2026-10 */
		                        INT64_MAX / 2 };
	const char          *tags[] = { "promo", "core" };
	ax_rule_target       t      = { .channel      = "Px",
		                        .impact       = 3,
		                        .priority     = 50,
		                        .dag          = "etl_orders",
		                        .owner        = "ads",
		                        .tags         = tags,
		                        .n_tags       = 2,
		                        .worker_group = "default" };
	char                *text   = malloc(size + 1);
	ax_rule              r;
	json_t              *d;

	if (text == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	if (ax_rule_parse_text(text, &r) != AX_OK) {
		if (ax_err_detail()[0] == '\0' ||
		    (d = json_string(ax_err_detail())) == NULL)
			__builtin_trap();
		json_decref(d);
	} else {
		if (ax_rule_specificity(&r) < 1 ||
		    (r.has_window &&
		     (r.win.start == r.win.end || r.win.start < 0 ||
		      r.win.end >= 86400 || r.win.start >= 86400)) ||
		    r.prio_min > 100 || r.prio_max > 100)
			__builtin_trap();
		for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
			const char *why = NULL;
			(void) ax_rules_decide(&r, 1, &t, at[i], &why);
		}
	}
	ax_rule_fini(&r);
	free(text);
	return 0;
}
