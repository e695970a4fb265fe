/*
 * pg_harness.h - throwaway PostgreSQL clusters for integration and e2e
 * tests.
 *
 * Role: each call to ax_test_pg_start gives a test its own running cluster
 * (own temp directory, own socket directory, database "ax", no schema), and
 * ax_test_pg_stop stops it and deletes everything. Link tests/meson.build's
 * `pg_harness_src` into the test executable.
 *
 * Invariants: initdb runs once per build directory into
 * $build/pg-template (guarded by $build/pg-template.lock, since tests run
 * in parallel), and so does the migrated template; each cluster is a copy
 * of one of them, started with the
 * test speed settings of ax_pg_embed_set_fast (fsync off). A cluster whose
 * owning process died without stopping it is stopped and removed by the
 * next ax_test_pg_start of any test.
 *
 * Workload: one or a few clusters per test process; start about 0.3 s
 * after the first (the template costs about 2 s once per build).
 */
#ifndef AX_PG_HARNESS_H
#define AX_PG_HARNESS_H

#include "ax_err.h"
#include "pg_embed.h"

typedef struct ax_test_pg ax_test_pg;

/*
 * Starts a fresh cluster in a new temp directory (/tmp/ax-test-pg-*).
 * On failure returns the error of the failing step with its detail
 * (ax_err_detail()) and leaves nothing behind. The caller owns *out and
 * must call ax_test_pg_stop.
 */
ax_err ax_test_pg_start(ax_test_pg **out);

/*
 * As ax_test_pg_start, with database "ax" already at this binary's schema
 * (ax_migrate_run has nothing to apply). The cluster is a copy of a
 * second template, migrated once per build directory and migration set
 * ($build/pg-template-ax-<fingerprint of the migrations' checksums>), so
 * a test skips the ~0.3 s of CPU that migrating costs. The month
 * partitions of event_log ahead of today are made on each start, as
 * ax_migrate_run makes them.
 */
ax_err ax_test_pg_start_migrated(ax_test_pg **out);

/* libpq conninfo of the cluster's database "ax". */
const char *ax_test_pg_dsn(const ax_test_pg *pg);

/* The cluster's AX home (for `axctl --home`); its cluster is $home/pg. */
const char *ax_test_pg_home(const ax_test_pg *pg);

/*
 * The cluster itself, e.g. to stop and restart the server mid-test with
 * ax_pg_embed_down / ax_pg_embed_up. Owned by pg.
 */
ax_pg_embed *ax_test_pg_embed(ax_test_pg *pg);

/* Stops the server and removes the temp directory. Accepts NULL. */
void ax_test_pg_stop(ax_test_pg *pg);

#endif /* AX_PG_HARNESS_H */
