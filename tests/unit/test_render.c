#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"

/* 2026-03-28T18:30:00Z is 2026-03-29 02:30 in Asia/Shanghai (+08:00) */
#define LOGICAL 1774722600000000LL
#define HOUR_US 3600000000LL

static ax_render_ctx
ctx(void)
{
	static const ax_render_param params[] = {
		{ "table", "ods.orders" },
		{ "region", "eu" },
	};
	ax_render_ctx c = {
		.logical_date_us   = LOGICAL,
		.interval_start_us = LOGICAL,
		.interval_end_us   = LOGICAL + 24 * HOUR_US,
		.utc_offset_s      = 8 * 3600,
		.run_id            = "0b9f7f0e-1c2d-4e5f-8a9b-0c1d2e3f4a5b",
		.dag_name          = "demo.diamond",
		.task_name         = "a",
		.shard_index       = 2,
		.shard_total       = 4,
		.params            = params,
		.n_params          = 2,
	};
	return c;
}

struct rcase {
	char tmpl[128];
	char want[128];
};

ParameterizedTestParameters(render, renders)
{
	static struct rcase cases[] = {
		{ "echo {{ ds }}", "echo 2026-03-29" },
		{ "{{ds_nodash}}", "20260329" },
		{ "{{ ts }}", "2026-03-29T02:30:00+08:00" },
		{ "{{ logical_date }}", "2026-03-29T02:30:00+08:00" },
		{ "{{ data_interval_start }}", "2026-03-29T02:30:00+08:00" },
		{ "{{ data_interval_end }}", "2026-03-30T02:30:00+08:00" },
		{ "{{ run_id }}", "0b9f7f0e-1c2d-4e5f-8a9b-0c1d2e3f4a5b" },
		{ "{{ dag.name }}/{{ task.name }}", "demo.diamond/a" },
		{ "{{ shard.index }} of {{ shard.total }}", "2 of 4" },
		{ "{{ params.table }}", "ods.orders" },
		{ "{{ ds | add_days(-1) }}", "2026-03-28" },
		{ "{{ ds | add_days(3) }}", "2026-04-01" },
		{ "{{ ds_nodash | add_days(-29) }}", "20260228" },
		{ "{{ ts | add_hours(-3) }}", "2026-03-28T23:30:00+08:00" },
		{ "{{ ts | add_minutes(45) }}", "2026-03-29T03:15:00+08:00" },
		{ "{{ ds | format('%Y/%m/%d') }}", "2026/03/29" },
		{ "{{ ds | add_days(-1) | format(\"%d.%m.%Y\") }}",
		  "28.03.2026" },
		{ "a {{ '{{' }} b }}", "a {{ b }}" },
		{ "no templates here: ${HOME} {x}",
		  "no templates here: ${HOME} {x}" },
		{ "", "" },
		{ "{{ds}}{{ds_nodash}}", "2026-03-2920260329" },
	};
	return cr_make_param_array(struct rcase, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct rcase *c, render, renders)
{
	ax_render_ctx k   = ctx();
	char         *out = NULL;
	ax_render_err e;
	ax_err        rv = ax_render(c->tmpl, &k, &out, &e);
	cr_assert_eq(rv, AX_OK, "'%s': %s", c->tmpl, ax_err_detail());
	cr_assert_str_eq(out, c->want, "'%s'", c->tmpl);
	free(out);
	/* whatever renders also passes check mode */
	const char *names[] = { "table", "region" };
	cr_assert_eq(ax_render_check(c->tmpl, names, 2, 0, NULL, NULL), 0,
	             "'%s'", c->tmpl);
}

struct ecase {
	char   tmpl[128];
	size_t offset;
	char   msg[200];
};

ParameterizedTestParameters(render, errors)
{
	static struct ecase cases[] = {
		{ "echo {{ dss }}", 8,
		  "unknown template variable 'dss'; did you mean 'ds'?" },
		{ "{{ params.tabel }}", 3,
		  "unknown template variable 'params.tabel'; declare 'tabel' "
		  "under params" },
		{ "x {{ ds", 2, "unterminated '{{': missing '}}'" },
		{ "{{ }}", 0,
		  "empty '{{ }}'; write a variable, e.g. {{ ds }}" },
		{ "{{ ds | add_dayz(1) }}", 8,
		  "unknown filter 'add_dayz'; did you mean 'add_days'?" },
		{ "{{ run_id | add_days(1) }}", 12,
		  "filter 'add_days' needs a date value (ds, ts, "
		  "logical_date, "
		  "data_interval_start, data_interval_end)" },
		{ "{{ ds | add_days('x') }}", 8,
		  "filter 'add_days' takes one integer argument, e.g. "
		  "add_days(-1)" },
		{ "{{ ds | add_days }}", 8,
		  "filter 'add_days' takes one integer argument, e.g. "
		  "add_days(-1)" },
		{ "{{ ds ds }}", 6,
		  "expected '|' or '}}' after the value, got 'd'" },
		{ "{{ ds | add_days(999999) }}", 17,
		  "argument 999999 of 'add_days' is out of range "
		  "-100000..100000" },
		{ "{{ shard }}", 3, "unknown template variable 'shard'" },
	};
	return cr_make_param_array(struct ecase, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct ecase *c, render, errors)
{
	ax_render_ctx k   = ctx();
	char         *out = (char *) 1;
	ax_render_err e;
	ax_err        rv = ax_render(c->tmpl, &k, &out, &e);
	cr_assert_eq(rv, AX_EPARSE, "'%s'", c->tmpl);
	cr_assert_null(out, "no partial output on error");
	cr_assert_str_eq(e.msg, c->msg, "'%s'", c->tmpl);
	cr_assert_eq(e.offset, c->offset, "'%s': offset %zu", c->tmpl,
	             e.offset);
	cr_assert(strstr(ax_err_detail(), c->msg) != NULL);
}

struct seen {
	size_t n;
	size_t off[8];
	char   msg[8][200];
};

static void
collect(void *arg, size_t off, const char *msg)
{
	struct seen *s = arg;
	if (s->n < 8) {
		s->off[s->n] = off;
		snprintf(s->msg[s->n], sizeof(s->msg[0]), "%s", msg);
	}
	s->n++;
}

Test(render, check_mode_reports_every_error)
{
	const char *names[] = { "table" };
	struct seen s       = { 0 };
	size_t      n       = ax_render_check(
	               "{{ ds }} {{ dss }} {{ params.table }} {{ params.x }} {{ tss }}",
	               names, 1, 0, collect, &s);
	cr_assert_eq(n, 3);
	cr_assert_eq(s.n, 3);
	cr_assert_eq(s.off[0], 12);
	cr_assert_eq(s.off[1], 41);
	cr_assert_eq(s.off[2], 56);
	cr_assert_str_eq(
	    s.msg[2], "unknown template variable 'tss'; did you mean 'ts'?");
}

Test(render, check_mode_any_param_and_suggestions)
{
	const char *names[] = { "table", "region" };
	struct seen s       = { 0 };
	cr_assert_eq(
	    ax_render_check("{{ params.whatever }}", NULL, 0, 1, NULL, NULL),
	    0);
	cr_assert_eq(
	    ax_render_check("{{ params.regoin }}", names, 2, 0, collect, &s),
	    1);
	cr_assert_str_eq(s.msg[0],
	                 "unknown template variable 'params.regoin'; declare "
	                 "'regoin' under params (did you mean "
	                 "'params.region'?)");
}

Test(render, negative_offset_and_pre_epoch)
{
	ax_render_ctx k   = ctx();
	char         *out = NULL;
	k.utc_offset_s    = -5 * 3600;
	k.logical_date_us = -1; /* 1969-12-31T23:59:59.999999Z */
	cr_assert_eq(ax_render("{{ ts }} {{ ds }}", &k, &out, NULL), AX_OK);
	cr_assert_str_eq(out, "1969-12-31T18:59:59-05:00 1969-12-31");
	free(out);
}

Test(render, long_param_values_are_copied_whole)
{
	static char     big[4000];
	ax_render_param p = { "blob", big };
	ax_render_ctx   k = ctx();
	char           *out;
	memset(big, 'x', sizeof(big) - 1);
	k.params   = &p;
	k.n_params = 1;
	cr_assert_eq(ax_render("<{{ params.blob }}>", &k, &out, NULL), AX_OK);
	cr_assert_eq(strlen(out), sizeof(big) - 1 + 2);
	free(out);
}
