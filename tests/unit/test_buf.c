/*
 * test_buf.c - the growable buffer: appends and printf across many
 * doublings, reserve/commit, take; the sticky error at the size limit
 * (every later call a no-op, the text cut at a call boundary, one report
 * from take); and the array-grow helper.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

Test(buf, zeroed_is_empty)
{
	ax_buf b = { 0 };
	char  *s;
	size_t n = 99;

	cr_assert_str_eq(ax_buf_str(&b), "");
	cr_assert_eq(ax_buf_len(&b), 0);
	cr_assert_eq(ax_buf_err(&b), AX_OK);
	cr_assert_eq(ax_buf_take(&b, &s, &n), AX_OK);
	cr_assert_str_eq(s, "");
	cr_assert_eq(n, 0);
	free(s);
	ax_buf_fini(&b);
}

Test(buf, appends_across_many_doublings)
{
	ax_buf b;
	char  *s;
	size_t n;

	ax_buf_init(&b, 0);
	for (int i = 0; i < 100000; i++) {
		ax_buf_printf(&b, "%d,", i);
		if (i % 1000 == 0) {
			ax_buf_puts(&b, "[");
			ax_buf_putc(&b, ']');
			ax_buf_append(&b, "a\0b", 3); /* NULs are bytes too */
		}
	}
	cr_assert_eq(ax_buf_err(&b), AX_OK);
	cr_assert_eq(ax_buf_take(&b, &s, &n), AX_OK);
	cr_assert_eq(b.p, NULL);
	/* rebuild the expected text piece by piece */
	size_t off = 0;
	char   want[32];
	for (int i = 0; i < 100000; i++) {
		int k = snprintf(want, sizeof(want), "%d,", i);
		cr_assert_eq(memcmp(s + off, want, (size_t) k), 0, "at %d", i);
		off += (size_t) k;
		if (i % 1000 == 0) {
			cr_assert_eq(memcmp(s + off, "[]a\0b", 5), 0);
			off += 5;
		}
	}
	cr_assert_eq(off, n);
	cr_assert_eq(s[n], '\0');
	free(s);
}

Test(buf, long_printf_and_reserve_commit)
{
	ax_buf b = { 0 };
	char   big[10000];
	char  *w;

	memset(big, 'z', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ax_buf_puts(&b, "<");
	ax_buf_printf(&b, "%s|%s", big, big); /* measure-and-redo path */
	ax_buf_puts(&b, ">");
	cr_assert_eq(ax_buf_len(&b), 2 + 2 * (sizeof(big) - 1) + 1);
	cr_assert_eq(ax_buf_str(&b)[sizeof(big)], '|');
	w = ax_buf_reserve(&b, 3);
	cr_assert_not_null(w);
	memcpy(w, "abc", 2);
	ax_buf_commit(&b, 2);
	cr_assert_eq(ax_buf_len(&b), 2 * sizeof(big) + 3);
	cr_assert_str_eq(ax_buf_str(&b) + ax_buf_len(&b) - 3, ">ab");
	ax_buf_reset(&b);
	cr_assert_str_eq(ax_buf_str(&b), "");
	ax_buf_puts(&b, "again");
	cr_assert_str_eq(ax_buf_str(&b), "again");
	ax_buf_fini(&b);
}

/* One call per row; the limit falls inside the call of row `fails`. */
typedef struct lim_case {
	char   name[16]; /* arrays, not pointers: criterion copies params */
	size_t max;
	int    op; /* 0 append, 1 printf (fits in room), 2 printf big,
	              3 reserve */
	int fails; /* index of the first call that passes max */
} lim_case;

static lim_case lims[] = {
	{ "append", 100, 0, 10 }, /* 10 bytes a call: call 10 ends at 110 */
	{ "printf", 100, 1, 10 }, /* same through vsnprintf */
	{ "printf_big", 5000, 2, 4 }, /* 1,200 a call: call 4 ends at 6,000 */
	{ "reserve", 100, 3, 10 },
	{ "exact", 90, 0, 9 }, /* call 8 ends exactly at 90: fits */
};

ParameterizedTestParameters(buf, sticky_error_at_limit)
{
	return cr_make_param_array(lim_case, lims,
	                           sizeof(lims) / sizeof(lims[0]));
}

ParameterizedTest(lim_case *c, buf, sticky_error_at_limit)
{
	ax_buf b;
	char   piece[1300], *s = (char *) 1;
	size_t n = 7, len_at_fail = 0;
	int    per = c->op == 2 ? 1200 : 10;

	memset(piece, 'p', sizeof(piece));
	piece[per] = '\0';
	ax_buf_init(&b, c->max);
	for (int i = 0; i < 30; i++) {
		if (i == c->fails)
			len_at_fail = ax_buf_len(&b);
		switch (c->op) {
		case 0:
			ax_buf_append(&b, piece, (size_t) per);
			break;
		case 1:
		case 2:
			ax_buf_printf(&b, "%s", piece);
			break;
		default: {
			char *w = ax_buf_reserve(&b, 10);
			cr_assert_eq(w == NULL, i >= c->fails);
			if (w != NULL) {
				memcpy(w, piece, 10);
				ax_buf_commit(&b, 10);
			}
		}
		}
		cr_assert_eq(ax_buf_err(&b), i >= c->fails ? AX_ELIMIT : AX_OK,
		             "call %d", i);
		/* after the error nothing changes: sticky no-ops */
		if (i >= c->fails)
			cr_assert_eq(ax_buf_len(&b), len_at_fail);
		cr_assert_leq(ax_buf_len(&b), c->max);
		cr_assert_eq(strlen(ax_buf_str(&b)), ax_buf_len(&b),
		             "a cut call left bytes behind");
	}
	cr_assert_eq(len_at_fail, (size_t) c->fails * (size_t) per);
	cr_assert_eq(ax_buf_take(&b, &s, &n), AX_ELIMIT);
	cr_assert_null(s);
	cr_assert_eq(n, 0);
	cr_assert(strstr(ax_err_detail(), "limit") != NULL, "%s",
	          ax_err_detail());
	/* the buffer is usable again, error cleared, limit kept */
	cr_assert_eq(ax_buf_err(&b), AX_OK);
	ax_buf_puts(&b, "ok");
	cr_assert_eq(ax_buf_take(&b, &s, NULL), AX_OK);
	cr_assert_str_eq(s, "ok");
	free(s);
}

Test(buf, enormous_request_is_an_error_not_a_wrap)
{
	ax_buf b = { 0 };
	ax_buf_puts(&b, "x");
	cr_assert_null(ax_buf_reserve(&b, SIZE_MAX - 1));
	cr_assert_eq(ax_buf_err(&b), AX_ENOMEM);
	ax_buf_puts(&b, "more");
	cr_assert_str_eq(ax_buf_str(&b), "x");
	ax_buf_fini(&b);
	cr_assert_eq(ax_buf_err(&b), AX_OK);
}

Test(buf, set_err_is_sticky_and_first_wins)
{
	ax_buf b = { 0 };
	char  *s = (char *) 1;

	ax_buf_puts(&b, "part");
	ax_buf_set_err(&b, AX_OK); /* not an error: no change */
	cr_assert_eq(ax_buf_err(&b), AX_OK);
	ax_buf_set_err(&b, AX_ENOMEM);
	ax_buf_set_err(&b, AX_ELIMIT); /* the first one stays */
	ax_buf_puts(&b, " more");
	cr_assert_str_eq(ax_buf_str(&b), "part");
	cr_assert_eq(ax_buf_take(&b, &s, NULL), AX_ENOMEM);
	cr_assert_null(s);
	cr_assert(strstr(ax_err_detail(), "out of memory") != NULL);
}

Test(grow, doubles_and_keeps_contents)
{
	int   *v   = NULL;
	size_t cap = 0, caps = 0, last = 0;

	for (size_t i = 0; i < 100000; i++) {
		cr_assert_eq(AX_GROW(v, cap, i + 1), AX_OK);
		cr_assert_geq(cap, i + 1);
		if (cap != last) {
			caps++;
			last = cap;
		}
		v[i] = (int) i;
	}
	cr_assert_eq(cap & (cap - 1), 0, "cap %zu", cap);
	cr_assert_leq(caps, 14);
	for (size_t i = 0; i < 100000; i++)
		cr_assert_eq(v[i], (int) i);
	/* a jump to far more than double */
	cr_assert_eq(AX_GROW(v, cap, 1000000), AX_OK);
	cr_assert_geq(cap, 1000000);
	cr_assert_eq(v[99999], 99999);
	free(v);
}

Test(grow, overflow_is_refused_unchanged)
{
	uint64_t *v   = NULL, *keep;
	size_t    cap = 0;

	cr_assert_eq(AX_GROW(v, cap, 10), AX_OK);
	keep = v;
	cr_assert_eq(AX_GROW(v, cap, SIZE_MAX / 4), AX_ENOMEM);
	cr_assert_eq(v, keep);
	cr_assert_eq(cap, 16);
	cr_assert_eq(AX_GROW(v, cap, 16), AX_OK); /* no-op: fits */
	free(v);
}
