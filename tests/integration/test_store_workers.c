/*
 * test_store_workers.c - the batched upsert of the workers table
 * (engine/store_workers.c) against a real PostgreSQL.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "store_fixture.h"
#include "store_workers.h"

AX_TEST_STORE_SUITE(store_workers);

static int64_t
q64(const char *sql)
{
	return ax_test_q_int(st, "%s", sql);
}

Test(store_workers, upsert_inserts_then_updates_in_one_statement)
{
	int64_t             now     = 1800000000000000LL;
	ax_store_worker_row rows[2] = {
		{ .id                  = "w1",
		  .worker_group        = "g",
		  .slots               = 4,
		  .used_slots          = 1,
		  .hostname            = "h\"1",
		  .pid                 = 10,
		  .state               = "ACTIVE",
		  .registered_at_us    = now,
		  .heartbeat_at_us     = now,
		  .lease_expires_at_us = now + 10000000 },
		{ .id                  = "w2",
		  .worker_group        = "g2",
		  .slots               = 2,
		  .state               = "ACTIVE",
		  .registered_at_us    = now,
		  .heartbeat_at_us     = now,
		  .lease_expires_at_us = now + 10000000 },
	};
	cr_assert_eq(ax_store_workers_upsert(st, rows, 2), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(q64("SELECT count(*) FROM workers"), 2);
	rows[0].used_slots      = 3;
	rows[0].state           = "LOST";
	rows[0].heartbeat_at_us = now + 5;
	cr_assert_eq(ax_store_workers_upsert(st, rows, 1), AX_OK);
	cr_assert_eq(q64("SELECT count(*) FROM workers"), 2);
	cr_assert_eq(q64("SELECT used_slots FROM workers WHERE id = 'w1'"), 3);
	cr_assert_eq(q64("SELECT count(*) FROM workers WHERE id = 'w1' AND "
	                 "state = 'LOST' AND hostname = 'h\"1'"),
	             1);
	cr_assert_eq(q64("SELECT ax_us(last_heartbeat_at) FROM workers "
	                 "WHERE id = 'w1'"),
	             now + 5);
	cr_assert_eq(ax_store_workers_upsert(st, rows, 0), AX_OK);
	/* the lease is kept on the database clock: the time of the write
	 * plus the lease the queue gave (10 s), whatever the writer's
	 * clock says, so another axd can tell how long the worker runs on */
	cr_assert_eq(q64("SELECT (ax_us(lease_expires_at) - ax_us(now()) "
	                 "BETWEEN 9000000 AND 10000000)::int FROM workers "
	                 "WHERE id = 'w2'"),
	             1, "lease_expires_at is not the write time + 10 s");
}

/* The live water level: written when the row has it, kept when a later
 * row has none (a worker without the report, or a state change). */
Test(store_workers, usage_is_written_and_kept_when_absent)
{
	int64_t             now = 1800000000000000LL;
	ax_store_worker_row r   = { .id                  = "w1",
		                    .worker_group        = "g",
		                    .slots               = 4,
		                    .state               = "ACTIVE",
		                    .registered_at_us    = now,
		                    .heartbeat_at_us     = now,
		                    .lease_expires_at_us = now + 10000000 };

	cr_assert_eq(ax_store_workers_upsert(st, &r, 1), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(q64("SELECT count(*) FROM workers WHERE cpus IS NULL "
	                 "AND tasks_rss_kb IS NULL"),
	             1, "no report yet: NULL");
	r.has_usage        = 1;
	r.load_x100        = 150;
	r.cpus             = 8;
	r.mem_total_kb     = 16000000;
	r.mem_available_kb = 9000000;
	r.tasks_cpu_milli  = 2500;
	r.tasks_rss_kb     = 400000;
	cr_assert_eq(ax_store_workers_upsert(st, &r, 1), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(q64("SELECT tasks_cpu_milli + cpus + load_x100 FROM "
	                 "workers"),
	             2658);
	cr_assert_eq(q64("SELECT tasks_rss_kb + mem_available_kb FROM "
	                 "workers"),
	             9400000);
	r.has_usage = 0;
	r.state     = "LOST";
	cr_assert_eq(ax_store_workers_upsert(st, &r, 1), AX_OK);
	cr_assert_eq(q64("SELECT mem_total_kb FROM workers WHERE state = "
	                 "'LOST'"),
	             16000000, "the last report is kept");
	r.has_usage    = 1;
	r.tasks_rss_kb = -1;
	cr_assert_eq(ax_store_workers_upsert(st, &r, 1), AX_EINVAL);
	cr_assert(strstr(ax_err_detail(), "negative usage") != NULL, "%s",
	          ax_err_detail());
}

Test(store_workers, bad_rows_are_refused_with_the_row_named)
{
	ax_store_worker_row r = {
		.id = "w", .worker_group = "g", .slots = 1, .state = "ACTIVE"
	};
	r.state = "ALIVE";
	cr_assert_eq(ax_store_workers_upsert(st, &r, 1), AX_EINVAL);
	cr_assert(strstr(ax_err_detail(), "state 'ALIVE'") != NULL);
	r.state = "ACTIVE";
	r.id    = "";
	cr_assert_eq(ax_store_workers_upsert(st, &r, 1), AX_EINVAL);
	cr_assert(strstr(ax_err_detail(), "empty id") != NULL);
	r.id    = "w";
	r.slots = -1;
	cr_assert_eq(ax_store_workers_upsert(st, &r, 1), AX_EINVAL);
	r.slots        = 1;
	r.worker_group = "";
	cr_assert_eq(ax_store_workers_upsert(st, &r, 1), AX_EINVAL);
	cr_assert(strstr(ax_err_detail(), "empty worker_group") != NULL);
	cr_assert_eq(ax_store_workers_upsert(st, &r, 10001), AX_EINVAL);
	cr_assert_eq(q64("SELECT count(*) FROM workers"), 0);
}
