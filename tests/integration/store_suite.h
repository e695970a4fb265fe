/*
 * store_suite.h - the fixture of the store's integration suites
 * (tests/integration/test_store*.c that share suite "store"): each test
 * gets its own migrated cluster, a store on it (st), one DAG with one
 * version (dag_id) and one scheduled run (run_id) at LOGICAL_US.
 *
 * Use: TestSuite(store, .init = ax_store_suite_setup,
 *                .fini = ax_store_suite_teardown, .timeout = 120);
 */
#ifndef AX_STORE_SUITE_H
#define AX_STORE_SUITE_H

#include <stdint.h>

#include "pg_harness.h"
#include "store.h"
#include "store_instances.h"

#define LOGICAL_US 1774749600000000LL /* 2026-03-29, the run's date */

extern ax_test_pg *pg;
extern ax_store   *st;
extern int64_t     dag_id, run_id;
/* Task names "t<i>", written once before a test starts: fill_row only
 * reads them, so writer threads never write memory another one reads. */
extern char tasks[512][16];

void ax_store_suite_setup(void);
void ax_store_suite_teardown(void);
/* The int64 that sql returns (asserted). */
int64_t q64(const char *sql);
void    fill_names(void);
/* Fills row i of a batch: task "t<i>", shard 0, PENDING, attempt 1. */
void fill_row(ax_store_ti_row *r, int i, const char *run_uuid);
/* Inserts the instance of fill_row(0); returns its id. */
int64_t one_instance(void);

#endif /* AX_STORE_SUITE_H */
