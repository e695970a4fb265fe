/*
 * store_fixture.h - helpers the integration tests share on top of a
 * migrated throwaway database (tests/pg_harness.h): start and migrate
 * one with a pipeline context, store a DAG from YAML, read one integer
 * with a query, send a command to an actor.
 *
 * Both assert (criterion) instead of returning errors: a failure here is
 * a broken test setup, reported with the detail and the SQL.
 */
#ifndef AX_TEST_STORE_FIXTURE_H
#define AX_TEST_STORE_FIXTURE_H

#include <stdarg.h>
#include <stdint.h>

#include "actor.h"
#include "config.h"
#include "dag_store.h"
#include "pg_harness.h"
#include "pipeline.h"
#include "store.h"

/* Starts a throwaway cluster (*pg), migrates it and opens *st on it;
 * ax_test_store_db_stop closes *st and stops the cluster. */
void ax_test_store_db(ax_test_pg **pg, ax_store **st);
void ax_test_store_db_stop(ax_test_pg *pg, ax_store *st);

/*
 * A criterion suite whose every test gets that cluster and store, as the
 * file's statics `pg` and `st` (include <criterion/criterion.h> first).
 */
#define AX_TEST_STORE_SUITE(suite)                                            \
	static ax_test_pg *pg;                                                \
	static ax_store   *st;                                                \
	static void        suite##_setup(void)                                \
	{                                                                     \
		ax_test_store_db(&pg, &st);                                   \
	}                                                                     \
	static void suite##_teardown(void)                                    \
	{                                                                     \
		ax_test_store_db_stop(pg, st);                                \
	}                                                                     \
	TestSuite(suite, .init = suite##_setup, .fini = suite##_teardown,     \
	          .timeout = 120)

/*
 * The same (ax_test_store_db), and sets ctx->cfg (*cfg, the defaults) and
 * ctx->dsn; logs at warn.
 */
void ax_test_pipeline_db(ax_test_pg **pg, ax_store **st, ax_config **cfg,
                         ax_pipeline_ctx *ctx);

/* Sends cmd to the actor dest of sys from a client named "test". */
void ax_test_send(ax_actor_system *sys, const char *dest, Ax__Command *cmd);

/* Validates and stores the one DAG of yaml; returns ids of the result. */
ax_dag_store_result ax_test_store_dag(ax_store *st, const char *yaml);

/* How often the session of st planned its prepared statement name with
 * a generic and a custom plan (pg_prepared_statements); 0 when st has no
 * statement of that name, 1 when it has. */
int ax_test_plans(ax_store *st, const char *name, int64_t *generic,
                  int64_t *custom);

/* The integer in the first column of the first row of the query. */
int64_t ax_test_q_int(ax_store *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int64_t ax_test_q_intv(ax_store *st, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

#endif /* AX_TEST_STORE_FIXTURE_H */
