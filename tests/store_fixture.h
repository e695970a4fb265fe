/*
 * store_fixture.h - helpers the integration tests share on top of a
 * migrated throwaway database (tests/pg_harness.h): store a DAG from
 * YAML, read one integer with a query.
 *
 * Both assert (criterion) instead of returning errors: a failure here is
 * a broken test setup, reported with the detail and the SQL.
 */
#ifndef AX_TEST_STORE_FIXTURE_H
#define AX_TEST_STORE_FIXTURE_H

#include <stdarg.h>
#include <stdint.h>

#include "dag_store.h"
#include "store.h"

/* Validates and stores the one DAG of yaml; returns ids of the result. */
ax_dag_store_result ax_test_store_dag(ax_store *st, const char *yaml);

/* The integer in the first column of the first row of the query. */
int64_t ax_test_q_int(ax_store *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int64_t ax_test_q_intv(ax_store *st, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

#endif /* AX_TEST_STORE_FIXTURE_H */
