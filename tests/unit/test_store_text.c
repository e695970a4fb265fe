/*
 * test_store_text.c - the store's text helpers that need no server: the
 * PostgreSQL array literals of the batched statements (ax_sqlarr) and the
 * DSN rewriting (ax_store_dsn_fenced, ax_store_dsn_redact).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "store_internal.h"

Test(sqlarr, empty_array_and_every_element_kind)
{
	ax_sqlarr a = { 0 }, b = { 0 };

	cr_assert_str_eq(ax_sqlarr_end(&a), "{}");
	ax_sqlarr_fini(&a);
	ax_sqlarr_int(&b, -42);
	ax_sqlarr_int0(&b, 0);
	ax_sqlarr_int0(&b, 7);
	ax_sqlarr_bool(&b, 1);
	ax_sqlarr_bool(&b, 0);
	ax_sqlarr_text(&b, NULL);
	ax_sqlarr_text(&b, "");
	ax_sqlarr_int(&b, INT64_MIN);
	ax_sqlarr_int(&b, 0);
	ax_sqlarr_int(&b, INT64_MAX);
	cr_assert_str_eq(ax_sqlarr_end(&b),
	                 "{-42,NULL,7,t,f,NULL,\"\",-9223372036854775808,0,"
	                 "9223372036854775807}");
	ax_sqlarr_fini(&b);
	cr_assert_null(b.b.p);
	cr_assert_eq(b.n, 0, "fini leaves an empty array behind");
}

Test(sqlarr, text_is_quoted_and_escaped)
{
	ax_sqlarr a = { 0 };

	ax_sqlarr_text(&a, "a,b");
	ax_sqlarr_text(&a, "say \"hi\"");
	ax_sqlarr_text(&a, "back\\slash");
	ax_sqlarr_text(&a, "{NULL}");
	cr_assert_str_eq(ax_sqlarr_end(&a),
	                 "{\"a,b\",\"say \\\"hi\\\"\","
	                 "\"back\\\\slash\",\"{NULL}\"}");
	ax_sqlarr_fini(&a);
}

Test(sqlarr, grows_past_its_first_buffer)
{
	ax_sqlarr a = { 0 };
	char      big[3000];

	/* 2999 bytes with a quote every 100: the text is copied in runs
	 * between escapes, and must come out whole */
	for (size_t i = 0; i < sizeof(big) - 1; i++)
		big[i] = i % 100 == 99 ? '"' : (char) ('a' + i % 26);
	big[sizeof(big) - 1] = '\0';
	for (int i = 0; i < 1000; i++)
		ax_sqlarr_int(&a, i);
	ax_sqlarr_text(&a, big);
	const char *s = ax_sqlarr_end(&a);
	cr_assert_not_null(s);
	cr_assert_eq(a.n, 1001);
	cr_assert(strncmp(s, "{0,1,2,", 7) == 0);
	cr_assert_eq(strlen(s), a.b.len);
	/* the last element: the text quoted, each " escaped, then } */
	const char *t = strstr(s, ",999,\"");
	cr_assert_not_null(t, "element 999 missing");
	t += 5;
	cr_assert_eq(*t++, '"');
	for (size_t i = 0; i < sizeof(big) - 1; i++) {
		if (big[i] == '"')
			cr_assert_eq(*t++, '\\', "quote %zu not escaped", i);
		cr_assert_eq(*t++, big[i], "byte %zu of the text", i);
	}
	cr_assert_str_eq(t, "\"}");
	ax_sqlarr_fini(&a);
}

Test(sqlarr, end_all_closes_every_column_and_reports_oom)
{
	ax_sqlarr   a[3] = { 0 };
	const char *p[3];

	ax_sqlarr_int(&a[0], 1);
	ax_sqlarr_text(&a[1], "x");
	cr_assert_eq(ax_sqlarr_end_all(a, p, 3), AX_OK);
	cr_assert_str_eq(p[0], "{1}");
	cr_assert_str_eq(p[1], "{\"x\"}");
	cr_assert_str_eq(p[2], "{}");
	ax_sqlarr_fini_all(a, 3);
	cr_assert_null(a[0].b.p);
	cr_assert_null(a[1].b.p);

	/* an allocation failed while it was built */
	ax_buf_set_err(&a[2].b, AX_ENOMEM);
	cr_assert_eq(ax_sqlarr_end_all(a, p, 3), AX_ENOMEM);
	cr_assert_null(p[2]);
	cr_assert(strstr(ax_err_detail(), "out of memory") != NULL);
	ax_sqlarr_fini_all(a, 3);
}

/* A DSN and what its fenced form must contain: every option as given
 * (the password too: the result is used to connect), and the fence. */
typedef struct fenced_case {
	char    dsn[96];
	int64_t epoch;
	char    want[4][64]; /* substrings of the result; "": unused */
} fenced_case;

ParameterizedTestParameters(dsn_fenced, keeps_every_option_adds_the_fence)
{
	static fenced_case cases[] = {
		{ "host=/tmp/s port=5433 dbname=ax user=u password='p w'",
		  12,
		  { "host=/tmp/s", "port=5433", "password='p w'",
		    "options='-c ax.fence_epoch=12'" } },
		{ "postgresql://u:pw@db.example:6543/ax"
		  "?options=-c%20search_path%3Dx",
		  3,
		  { "host=db.example", "port=6543", "password=pw",
		    "options='-c search_path=x -c ax.fence_epoch=3'" } },
	};
	return cr_make_param_array(fenced_case, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(fenced_case *c, dsn_fenced,
                  keeps_every_option_adds_the_fence)
{
	char *out = NULL;

	cr_assert_eq(ax_store_dsn_fenced(c->dsn, c->epoch, &out), AX_OK,
	             "%s: %s", c->dsn, ax_err_detail());
	for (int i = 0; i < 4; i++)
		cr_expect(c->want[i][0] == '\0' ||
		              strstr(out, c->want[i]) != NULL,
		          "%s: no %s in %s", c->dsn, c->want[i], out);
	free(out);
}

Test(dsn_fenced, refuses_a_bad_dsn_or_epoch)
{
	char *out = (char *) 1;

	cr_assert_eq(ax_store_dsn_fenced("host=h", 0, &out), AX_EINVAL);
	cr_assert_null(out);
	cr_assert(strstr(ax_err_detail(), "must be >= 1") != NULL);
	cr_assert_eq(ax_store_dsn_fenced("host=h", -5, &out), AX_EINVAL);
	cr_assert_eq(ax_store_dsn_fenced("host='unterminated", 1, &out),
	             AX_EINVAL);
	cr_assert_null(out);
	cr_assert(strstr(ax_err_detail(), "cannot fence the DSN") != NULL,
	          "%s", ax_err_detail());
	cr_assert_eq(ax_store_dsn_fenced("nokey", 1, &out), AX_EINVAL);
}

Test(dsn_redact, masks_the_password_of_a_fenced_dsn)
{
	char *out = NULL, buf[512];

	cr_assert_eq(ax_store_dsn_fenced("host=h password=secret", 4, &out),
	             AX_OK);
	ax_store_dsn_redact(out, buf, sizeof(buf));
	cr_assert(strstr(buf, "secret") == NULL, "%s", buf);
	cr_assert(strstr(buf, "password=***") != NULL, "%s", buf);
	cr_assert(strstr(buf, "options='-c ax.fence_epoch=4'") != NULL, "%s",
	          buf);
	/* too small a buffer: whole options only, never half of one */
	ax_store_dsn_redact(out, buf, 16); /* libpq's order: password first */
	cr_assert_str_eq(buf, "password=***");
	free(out);
}
