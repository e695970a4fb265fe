/*
 * test_sched_table.c - the time detector's compact schedule records
 * (actors/support/sched_table.h): names found after many adds and deletes
 * (arena compaction included), ids of the whole bigint range through the
 * side table, generations that survive reuse, and spec codes that give
 * back exactly the expression they encode (and refuse the others).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "sched_table.h"

static ax_schedtab t;

static void
setup(void)
{
	ax_schedtab_init(&t);
}

static void
teardown(void)
{
	ax_schedtab_fini(&t);
}

TestSuite(sched_table, .init = setup, .fini = teardown);

static void
name_of(char *buf, size_t len, int i)
{
	snprintf(buf, len, "team.pipeline.%07d", i);
}

Test(sched_table, add_find_delete_and_reuse)
{
	uint32_t a, b, c;
	char     nm[64];

	cr_assert_eq(ax_schedtab_add(&t, "a", &a), AX_OK);
	cr_assert_eq(ax_schedtab_add(&t, "b", &b), AX_OK);
	cr_assert_neq(a, b);
	cr_assert_eq(ax_schedtab_add(&t, "a", &c), AX_EEXIST);
	cr_assert_eq(ax_schedtab_add(&t, "", &c), AX_EINVAL);
	memset(nm, 'x', sizeof(nm));
	cr_assert_eq(ax_schedtab_find(&t, "a"), a);
	cr_assert_eq(ax_schedtab_find(&t, "b"), b);
	cr_assert_eq(ax_schedtab_find(&t, "c"), AX_SCHEDTAB_NONE);
	cr_assert_str_eq(ax_schedtab_name(&t, b), "b");
	cr_assert_eq(ax_schedtab_count(&t), 2);

	ax_schedtab_at(&t, a)->gen      = 41;
	ax_schedtab_at(&t, a)->next_utc = 12345;
	ax_schedtab_del(&t, a);
	cr_assert_null(ax_schedtab_at(&t, a));
	cr_assert_null(ax_schedtab_name(&t, a));
	cr_assert_eq(ax_schedtab_find(&t, "a"), AX_SCHEDTAB_NONE);
	cr_assert_eq(ax_schedtab_count(&t), 1);
	/* the freed record is reused, owner fields cleared, gen moved on */
	cr_assert_eq(ax_schedtab_add(&t, "c", &c), AX_OK);
	cr_assert_eq(c, a);
	cr_assert_eq(ax_schedtab_at(&t, c)->next_utc, 0);
	cr_assert_eq(ax_schedtab_at(&t, c)->spec, 0);
	cr_assert_gt(ax_schedtab_at(&t, c)->gen, 41,
	             "a stale (index, gen) would match the new record");
	cr_assert_str_eq(ax_schedtab_name(&t, c), "c");
	ax_schedtab_del(&t, 999); /* out of range: nothing */
	cr_assert_eq(ax_schedtab_count(&t), 2);
}

/* 300,000 names (several arena chunks and record chunks), two thirds
 * deleted (compaction moves the names), the rest still found by name,
 * with their ids; then everything can be added again. */
Test(sched_table, many_names_survive_deletes_and_compaction)
{
	enum { N = 300000 };
	char    nm[64];
	int64_t ids[3];

	for (int i = 0; i < N; i++) {
		uint32_t idx;
		name_of(nm, sizeof(nm), i);
		cr_assert_eq(ax_schedtab_add(&t, nm, &idx), AX_OK);
		cr_assert_eq(
		    ax_schedtab_set_ids(&t, idx, i + 1, 2 * i + 1, 3 * i + 1),
		    AX_OK);
	}
	size_t full = ax_schedtab_bytes(&t);
	cr_assert_lt(full, (size_t) N * 75, "%zu bytes for %d schedules", full,
	             N);
	for (int i = 0; i < N; i++) {
		if (i % 3 == 0)
			continue;
		name_of(nm, sizeof(nm), i);
		ax_schedtab_del(&t, ax_schedtab_find(&t, nm));
	}
	cr_assert_eq(ax_schedtab_count(&t), (size_t) (N + 2) / 3);
	cr_assert_lt(t.name_used - t.name_live, t.name_live + (1u << 20) + 64,
	             "dead arena bytes were not reclaimed");
	for (int i = 0; i < N; i++) {
		uint32_t idx;
		name_of(nm, sizeof(nm), i);
		idx = ax_schedtab_find(&t, nm);
		if (i % 3 != 0) {
			cr_assert_eq(idx, AX_SCHEDTAB_NONE, "%s", nm);
			continue;
		}
		cr_assert_neq(idx, AX_SCHEDTAB_NONE, "%s lost", nm);
		cr_assert_str_eq(ax_schedtab_name(&t, idx), nm);
		ax_schedtab_ids(&t, idx, ids);
		cr_assert_eq(ids[0], i + 1);
		cr_assert_eq(ids[1], 2 * i + 1);
		cr_assert_eq(ids[2], 3 * i + 1);
	}
	for (int i = 0; i < N; i++) {
		uint32_t idx;
		if (i % 3 == 0)
			continue;
		name_of(nm, sizeof(nm), i);
		cr_assert_eq(ax_schedtab_add(&t, nm, &idx), AX_OK, "%s", nm);
	}
	cr_assert_eq(ax_schedtab_count(&t), N);
	cr_assert_lt(ax_schedtab_bytes(&t), full + full / 4);
}

Test(sched_table, ids_beyond_32_bits_use_the_side_table)
{
	uint32_t a, b;
	int64_t  ids[3];

	cr_assert_eq(ax_schedtab_add(&t, "a", &a), AX_OK);
	cr_assert_eq(ax_schedtab_add(&t, "b", &b), AX_OK);
	cr_assert_eq(
	    ax_schedtab_set_ids(&t, a, 7, INT64_MAX, (int64_t) UINT32_MAX + 1),
	    AX_OK);
	cr_assert_eq(ax_schedtab_set_ids(&t, b, 0, (int64_t) UINT32_MAX, -1),
	             AX_OK);
	cr_assert(ax_schedtab_at(&t, a)->flags & AX_SCHEDTAB_WIDE);
	ax_schedtab_ids(&t, a, ids);
	cr_assert_eq(ids[0], 7);
	cr_assert_eq(ids[1], INT64_MAX);
	cr_assert_eq(ids[2], (int64_t) UINT32_MAX + 1);
	ax_schedtab_ids(&t, b, ids);
	cr_assert_eq(ids[0], 0);
	cr_assert_eq(ids[1], (int64_t) UINT32_MAX);
	cr_assert_eq(ids[2], -1, "a negative id is kept as it is");
	/* narrow again: the side slot is given back and reused */
	cr_assert_eq(ax_schedtab_set_ids(&t, a, 1, 2, 3), AX_OK);
	cr_assert_not(ax_schedtab_at(&t, a)->flags & AX_SCHEDTAB_WIDE);
	ax_schedtab_ids(&t, a, ids);
	cr_assert_eq(ids[0] + ids[1] + ids[2], 6);
	ax_schedtab_del(&t, b);
	cr_assert_eq(ax_schedtab_add(&t, "c", &b), AX_OK);
	cr_assert_eq(ax_schedtab_set_ids(&t, b, INT64_MIN, 1, 1), AX_OK);
	ax_schedtab_ids(&t, b, ids);
	cr_assert_eq(ids[0], INT64_MIN);
	cr_assert_eq(t.nwide, 2, "freed side slots are reused");
}

typedef struct code_case {
	const char *expr;
	int         simple;
} code_case;

Test(sched_table, codes_round_trip_exactly)
{
	static code_case code_cases[] = {
		{ "0 0 0 1 * ?", 1 },
		{ "59 59 23 28 12 ?", 1 },
		{ "* * * * * ?", 1 },
		{ "0 0 * * *", 1 },
		{ "5 4 * * 7", 1 },
		{ "0 30 2 ? * 1", 1 },
		{ "*/5 * * * * ?", 0 },
		{ "0 0 0 1-5 * ?", 0 },
		{ "0 0 0 1,15 * ?", 0 },
		{ "00 0 0 1 * ?", 0 },
		{ "0  0 0 1 * ?", 0 },
		{ " 0 0 0 1 * ?", 0 },
		{ "0 0 0 1 * ? ", 0 },
		{ "0 0 0 1 * ? 2030", 0 },
		{ "0 0 0 L * ?", 0 },
		{ "0 0 0 1 JAN ?", 0 },
		{ "100 0 0 1 * ?", 0 },
		{ "0 0 0 1", 0 },
		{ "@daily", 0 },
		{ "@every 5m", 0 },
		{ "", 0 },
	};

	for (size_t i = 0; i < sizeof(code_cases) / sizeof(code_cases[0]);
	     i++) {
		const code_case *c    = &code_cases[i];
		uint64_t         code = 0;
		char             buf[32];
		const char      *zone;
		int              catchup = -1;

		cr_assert_eq(ax_schedtab_cron_code(&t, c->expr, "Europe/Paris",
		                                   1, &code),
		             c->simple, "'%s'", c->expr);
		if (!c->simple)
			continue;
		cr_assert(ax_schedtab_is_code(code));
		cr_assert_eq(ax_schedtab_cron_text(&t, code, buf, sizeof(buf),
		                                   &zone, &catchup),
		             strlen(c->expr));
		cr_assert_str_eq(buf, c->expr);
		cr_assert_str_eq(zone, "Europe/Paris");
		cr_assert_eq(catchup, 1);
	}
}

Test(sched_table, codes_differ_by_zone_catchup_and_fields)
{
	uint64_t    a, b, c, d, e;
	const char *zone;
	int         catchup;
	char        buf[32];

	cr_assert(ax_schedtab_cron_code(&t, "0 0 0 1 * ?", NULL, 0, &a));
	cr_assert(ax_schedtab_cron_code(&t, "0 0 0 1 * ?", "UTC", 0, &b));
	cr_assert(
	    ax_schedtab_cron_code(&t, "0 0 0 1 * ?", "Asia/Tokyo", 0, &c));
	cr_assert(ax_schedtab_cron_code(&t, "0 0 0 1 * ?", "UTC", 1, &d));
	cr_assert(ax_schedtab_cron_code(&t, "0 0 0 2 * ?", "UTC", 0, &e));
	cr_assert_eq(a, b, "no zone is UTC");
	cr_assert_neq(a, c);
	cr_assert_neq(a, d);
	cr_assert_neq(a, e);
	ax_schedtab_cron_text(&t, a, buf, sizeof(buf), &zone, &catchup);
	cr_assert_str_eq(zone, "UTC");
	cr_assert_eq(catchup, 0);
	ax_schedtab_cron_text(&t, c, buf, sizeof(buf), &zone, NULL);
	cr_assert_str_eq(zone, "Asia/Tokyo");
	/* a short buffer is cut, the length is still the whole one */
	cr_assert_eq(ax_schedtab_cron_text(&t, e, buf, 4, NULL, NULL), 11);
	cr_assert_str_eq(buf, "0 0");
	cr_assert_eq(t.nzones, 2);
}
