/*
 * migrate.h - versioned SQL migrations, embedded in the binary.
 *
 * Role: `axctl db migrate`, `axctl standalone` and the test harness bring a
 * database to the schema this binary was built with. The migrations are
 * the files engine/migrations/NNNN_<name>.sql, turned into the table
 * ax_migrations at build time (gen_migrations.py); versions run 1, 2, 3...
 *
 * Invariants: each migration runs in its own transaction together with
 * its row in schema_migrations (version, name, checksum, applied_at), so a
 * migration is applied entirely or not at all. Concurrent migrators are
 * serialised by a session advisory lock. A database whose version is newer
 * than the binary is refused (AX_ESCHEMA), and so is an applied migration
 * whose recorded checksum differs from the embedded file (someone edited a
 * released migration). Statements are split on `;` outside quotes,
 * comments and dollar-quoted bodies; SQL-standard `BEGIN ATOMIC` function
 * bodies are not supported (use $$ bodies).
 *
 * Workload: a few calls per process at start-up; each opens and closes its
 * own connection.
 */
#ifndef AX_MIGRATE_H
#define AX_MIGRATE_H

#include <stddef.h>

#include "ax_err.h"

typedef struct ax_migration {
	int         version;  /* 1, 2, 3, ... */
	const char *name;     /* file name, e.g. "0001_init.sql" */
	const char *sql;      /* the file's text */
	const char *checksum; /* lowercase hex SHA-256 of sql */
} ax_migration;

/* The migrations embedded at build time, ordered by version. */
extern const ax_migration ax_migrations[];
extern const size_t       ax_migrations_count;

/*
 * Applies every embedded migration the database lacks, in order; *applied
 * (may be NULL) receives how many were applied (0 when up to date). Errors:
 * AX_EDBCONN (cannot connect; the detail names the DSN without password),
 * AX_ESCHEMA (database newer than the binary, naming both versions; or a
 * checksum mismatch, naming the file), AX_EDB (a migration failed: it was
 * rolled back and the detail names the file, the statement's line:col in
 * it, the statement and PostgreSQL's message). Migrations applied before
 * a failing one stay applied and are counted in *applied.
 */
ax_err ax_migrate_run(const char *dsn, int *applied);

/*
 * Reads the database's schema version (0 when never migrated) into
 * *db_version and the binary's (the highest embedded version) into
 * *bin_version. Does not change the database. AX_EDBCONN, AX_EDB.
 */
ax_err ax_migrate_status(const char *dsn, int *db_version, int *bin_version);

/* As ax_migrate_run / ax_migrate_status with an explicit set of n
 * migrations ordered by version (tests, tools). */
ax_err ax_migrate_run_set(const char *dsn, const ax_migration *set, size_t n,
                          int *applied);
ax_err ax_migrate_status_set(const char *dsn, const ax_migration *set,
                             size_t n, int *db_version, int *bin_version);

/*
 * Statement splitter used by the migrator: finds the next non-empty
 * statement of sql at or after *pos. On success returns 1, sets *start and
 * *len to the statement (without its `;`) and advances *pos past it;
 * returns 0 when only whitespace and comments remain.
 */
int ax_migrate_next_statement(const char *sql, size_t *pos, size_t *start,
                              size_t *len);

#endif /* AX_MIGRATE_H */
