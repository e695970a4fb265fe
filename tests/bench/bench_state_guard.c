/*
 * bench_state_guard.c - what the task_instances state guard's WHEN
 * clause costs a state change (migration 0021).
 *
 * A throwaway cluster (tests/pg_harness.h, fsync off, so the numbers are
 * CPU and round trips, not disk), the schema migrated, and enough
 * RUNNING instances that each is moved once (84,000; 7,200 with
 * --quick). Three guards, switched between rounds so that the load of a
 * shared machine drifts over all of them alike:
 *   0013 function   WHEN calls the SQL function ax_ti_move_ok (the
 *                   guard of migrations 0013-0020; recreated here)
 *   0021 written    WHEN written out from ax_ti_move_legal by
 *                   ax_ti_guard_install() (the guard of today)
 *   no guard        the trigger dropped: the floor
 * Rows:
 *   single   one RUNNING -> SUCCESS update of one row, its own
 *            transaction (the chain's shape: one result, one move);
 *            median and P99 microseconds per statement
 *   batch    one update of 1,000 rows (the throughput shape);
 *            median microseconds per statement and per row
 *
 * Usage: bench_state_guard [--quick]. Bounded to ~30 s.
 */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "pg_harness.h"

enum { G_0013, G_0021, G_NONE, G_COUNT };

static const char *const labels[] = { "0013 function", "0021 written",
	                              "no guard" };

#define BATCH 1000

/* The guard of 0013: WHEN calls a SQL function, inlined per statement. */
#define SQL_GUARD_0013                                                        \
	"CREATE OR REPLACE FUNCTION bench_move_ok(f text, t text, "           \
	"o timestamptz, n timestamptz) RETURNS boolean LANGUAGE sql "         \
	"IMMUTABLE PARALLEL SAFE AS $$ SELECT coalesce(ax_ti_move_legal(f, "  \
	"t), false) OR (coalesce(ax_ti_move_legal(f, 'RUNNING'), false) AND " \
	"coalesce(ax_ti_move_legal('RUNNING', t), false) AND n IS NOT NULL "  \
	"AND n IS DISTINCT FROM o) $$; "                                      \
	"DROP TRIGGER IF EXISTS task_instances_state_guard ON "               \
	"task_instances; "                                                    \
	"CREATE TRIGGER task_instances_state_guard BEFORE UPDATE ON "         \
	"task_instances FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM "       \
	"NEW.state AND NOT bench_move_ok(OLD.state, NEW.state, "              \
	"OLD.started_at, NEW.started_at)) EXECUTE FUNCTION "                  \
	"ax_ti_state_guard()"

static PGconn *conn;

static void
exec_or_die(const char *sql)
{
	PGresult *r = PQexec(conn, sql);
	if (PQresultStatus(r) != PGRES_COMMAND_OK &&
	    PQresultStatus(r) != PGRES_TUPLES_OK) {
		fprintf(stderr, "%s\n%s", sql, PQerrorMessage(conn));
		exit(1);
	}
	PQclear(r);
}

static void
use_guard(int g)
{
	if (g == G_0013)
		exec_or_die(SQL_GUARD_0013);
	else if (g == G_0021)
		exec_or_die("SELECT ax_ti_guard_install()");
	else
		exec_or_die(
		    "DROP TRIGGER IF EXISTS task_instances_state_guard "
		    "ON task_instances");
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
	return x < y ? -1 : x > y;
}

/* One prepared update of the ids [lo, hi]; 1 when it moved them all. */
static int
move(int64_t lo, int64_t hi)
{
	char        a[24], b[24];
	const char *p[2] = { a, b };
	snprintf(a, sizeof(a), "%lld", (long long) lo);
	snprintf(b, sizeof(b), "%lld", (long long) hi);
	PGresult *r  = PQexecPrepared(conn, "mv", 2, p, NULL, NULL, 0);
	int       ok = PQresultStatus(r) == PGRES_COMMAND_OK &&
	    atoll(PQcmdTuples(r)) == hi - lo + 1;
	PQclear(r);
	return ok;
}

int
main(int argc, char **argv)
{
	int         quick  = argc > 1 && strcmp(argv[1], "--quick") == 0;
	int         rounds = quick ? 2 : 8;
	size_t      nsing  = quick ? 200 : 500; /* per guard and round */
	size_t      nbatch = quick ? 1 : 3;     /* per guard and round */
	size_t      per    = nsing + nbatch * BATCH;
	int64_t     rows   = (int64_t) (per * G_COUNT * (size_t) rounds);
	ax_test_pg *pg;
	char        sql[512];

	ax_log_init(AX_LOG_ERROR, 2);
	if (ax_test_pg_start_migrated(&pg) != AX_OK) {
		fprintf(stderr, "cluster: %s\n", ax_err_detail());
		return 1;
	}
	conn = PQconnectdb(ax_test_pg_dsn(pg));
	if (PQstatus(conn) != CONNECTION_OK) {
		fprintf(stderr, "connect: %s", PQerrorMessage(conn));
		return 1;
	}
	exec_or_die("SET client_min_messages = warning");
	exec_or_die("INSERT INTO dags (name) VALUES ('bench.guard')");
	exec_or_die("INSERT INTO dag_versions (dag_id, version, content_hash, "
	            "yaml, definition) SELECT id, 1, repeat('0', 64), '', "
	            "'{}' FROM dags");
	exec_or_die("INSERT INTO dag_runs (dag_id, dag_version_id, run_type, "
	            "logical_date, interval_start, interval_end) SELECT "
	            "dag_id, id, 'manual', now(), now(), now() FROM "
	            "dag_versions");
	snprintf(sql, sizeof(sql),
	         "INSERT INTO task_instances (dag_run_id, dag_id, task, "
	         "logical_time, state, started_at) SELECT r.id, r.dag_id, "
	         "'t' || g, r.logical_date, 'RUNNING', now() FROM dag_runs r, "
	         "generate_series(1, %lld) g",
	         (long long) rows);
	exec_or_die(sql);
	exec_or_die("VACUUM ANALYZE task_instances");
	PGresult *r = PQprepare(conn, "mv",
	                        "UPDATE task_instances SET state = 'SUCCESS', "
	                        "ended_at = now() WHERE id BETWEEN $1 AND $2 "
	                        "AND state = 'RUNNING'",
	                        2, NULL);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		fprintf(stderr, "prepare: %s", PQerrorMessage(conn));
		return 1;
	}
	PQclear(r);
	r           = PQexec(conn, "SELECT min(id) FROM task_instances");
	int64_t id  = atoll(PQgetvalue(r, 0, 0));
	size_t  bad = 0;
	PQclear(r);

	int64_t *sing[G_COUNT], *batch[G_COUNT];
	size_t   ns = 0, nb = 0;
	for (int g = 0; g < G_COUNT; g++) {
		sing[g]  = malloc(sizeof(int64_t) * nsing * (size_t) rounds);
		batch[g] = malloc(sizeof(int64_t) * nbatch * (size_t) rounds);
	}
	for (int k = 0; k < rounds; k++) {
		for (int j = 0; j < G_COUNT; j++) {
			/* odd rounds run the guards in reverse order */
			int g = k % 2 ? G_COUNT - 1 - j : j;
			use_guard(g);
			for (size_t i = 0; i < 20; i++) /* warm up */
				(void) move(0, -1);
			for (size_t i = 0; i < nsing; i++, id++) {
				int64_t t0 = ax_clock_mono_us();
				bad += !move(id, id);
				sing[g][ns + i] = ax_clock_mono_us() - t0;
			}
			for (size_t i = 0; i < nbatch; i++, id += BATCH) {
				int64_t t0 = ax_clock_mono_us();
				bad += !move(id, id + BATCH - 1);
				batch[g][nb + i] = ax_clock_mono_us() - t0;
			}
		}
		ns += nsing;
		nb += nbatch;
	}
	printf("state change RUNNING -> SUCCESS, %d rounds:\n", rounds);
	for (int g = 0; g < G_COUNT; g++) {
		qsort(sing[g], ns, sizeof(int64_t), cmp_i64);
		qsort(batch[g], nb, sizeof(int64_t), cmp_i64);
		printf("%-14s single n=%-5zu median %5lld us  p99 %5lld us   "
		       "batch n=%-3zu median %6lld us (%.2f us/row)\n",
		       labels[g], ns, (long long) sing[g][ns / 2],
		       (long long) sing[g][(size_t) ((double) ns * 0.99)], nb,
		       (long long) batch[g][nb / 2],
		       (double) batch[g][nb / 2] / BATCH);
		free(sing[g]);
		free(batch[g]);
	}
	if (bad)
		printf("%zu statements did not move their rows!\n", bad);
	PQfinish(conn);
	ax_test_pg_stop(pg);
	return bad ? 1 : 0;
}
