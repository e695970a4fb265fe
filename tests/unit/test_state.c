/*
 * test_state.c - the task instance state machine in C: every one of the
 * 81 (from, to) pairs against the table of DESIGN.md 3, the names, and
 * the error a caller gets for an illegal move or an unknown name.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <string.h>

#include "state.h"

/* The legal moves, written out independently of state.c. */
static const char *const legal[] = {
	"PENDING>READY",   "READY>RUNNING",    "RUNNING>SUCCESS",
	"RUNNING>FAILED",  "RUNNING>TIMEOUT",  "PENDING>CANCELED",
	"READY>CANCELED",  "RUNNING>CANCELED", "PENDING>SKIPPED",
	"RUNNING>UNKNOWN", "UNKNOWN>READY",    "UNKNOWN>SUCCESS",
	"UNKNOWN>FAILED",  "FAILED>PENDING",   "TIMEOUT>PENDING",
	"SUCCESS>PENDING", "CANCELED>PENDING", "SKIPPED>PENDING",
	"RUNNING>PENDING", /* preempted */
};

static int
expected_legal(ax_ti_state f, ax_ti_state t)
{
	char key[32];
	snprintf(key, sizeof(key), "%s>%s", ax_state_name(f),
	         ax_state_name(t));
	for (size_t i = 0; i < sizeof(legal) / sizeof(legal[0]); i++)
		if (strcmp(legal[i], key) == 0)
			return 1;
	return 0;
}

struct pair {
	int from;
	int to;
};

ParameterizedTestParameters(state, every_pair)
{
	static struct pair pairs[AX_TI_STATE_COUNT_ * AX_TI_STATE_COUNT_];
	for (int f = 0; f < AX_TI_STATE_COUNT_; f++)
		for (int t = 0; t < AX_TI_STATE_COUNT_; t++)
			pairs[f * AX_TI_STATE_COUNT_ + t] =
			    (struct pair) { f, t };
	return cr_make_param_array(struct pair, pairs,
	                           sizeof(pairs) / sizeof(pairs[0]));
}

ParameterizedTest(struct pair *p, state, every_pair)
{
	ax_ti_state f = (ax_ti_state) p->from, t = (ax_ti_state) p->to;
	int         want = expected_legal(f, t);
	char        msg[96];

	cr_assert_eq(ax_state_legal(f, t), want, "%s -> %s", ax_state_name(f),
	             ax_state_name(t));
	if (want) {
		cr_assert_eq(ax_state_check(f, t), AX_OK);
		return;
	}
	cr_assert_eq(ax_state_check(f, t), AX_ESTATE);
	snprintf(msg, sizeof(msg), "%s -> %s is not a legal move",
	         ax_state_name(f), ax_state_name(t));
	cr_assert(strstr(ax_err_detail(), msg) != NULL, "%s", ax_err_detail());
}

Test(state, nineteen_legal_moves)
{
	int n = 0;
	for (int f = 0; f < AX_TI_STATE_COUNT_; f++)
		for (int t = 0; t < AX_TI_STATE_COUNT_; t++)
			n += ax_state_legal((ax_ti_state) f, (ax_ti_state) t);
	cr_assert_eq(n, 19);
}

Test(state, names_round_trip)
{
	for (int i = 0; i < AX_TI_STATE_COUNT_; i++) {
		ax_ti_state s = AX_TI_STATE_COUNT_;
		cr_assert_eq(
		    ax_state_parse(ax_state_name((ax_ti_state) i), &s), AX_OK);
		cr_assert_eq(s, (ax_ti_state) i);
	}
	cr_assert_str_eq(ax_state_name(AX_TI_RUNNING), "RUNNING");
	cr_assert_str_eq(ax_state_name(AX_TI_STATE_COUNT_), "INVALID");
	cr_assert_str_eq(ax_state_name((ax_ti_state) -1), "INVALID");
}

Test(state, bad_names_are_refused)
{
	static const char *bad[] = { "running", "", "DONE", "PENDING " };
	ax_ti_state        s     = AX_TI_READY;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(ax_state_parse(bad[i], &s), AX_EINVAL, "'%s'",
		             bad[i]);
		cr_assert(strstr(ax_err_detail(), "PENDING, READY") != NULL);
	}
	cr_assert_eq(ax_state_parse(NULL, &s), AX_EINVAL);
	cr_assert_eq(s, AX_TI_READY, "output untouched on error");
}

Test(state, out_of_range_is_never_legal)
{
	cr_assert_eq(ax_state_legal(AX_TI_STATE_COUNT_, AX_TI_READY), 0);
	cr_assert_eq(ax_state_legal(AX_TI_PENDING, AX_TI_STATE_COUNT_), 0);
	cr_assert_eq(ax_state_check((ax_ti_state) 42, AX_TI_READY), AX_ESTATE);
	cr_assert(strstr(ax_err_detail(), "INVALID -> READY") != NULL);
}

Test(state, terminal_states)
{
	cr_assert(ax_state_terminal(AX_TI_SUCCESS));
	cr_assert(ax_state_terminal(AX_TI_SKIPPED));
	cr_assert(!ax_state_terminal(AX_TI_UNKNOWN));
	cr_assert(!ax_state_terminal(AX_TI_RUNNING));
}

Test(state, illegal_detail_lists_legal_targets)
{
	cr_assert_eq(ax_state_check(AX_TI_PENDING, AX_TI_SUCCESS), AX_ESTATE);
	cr_assert(strstr(ax_err_detail(), "READY, CANCELED, SKIPPED") != NULL,
	          "%s", ax_err_detail());
}
