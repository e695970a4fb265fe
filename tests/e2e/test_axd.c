/*
 * test_axd.c - axd as a process (actors/axd.c): start-up checks, the
 * scheduler lease (standby, take-over after kill -9, loss, a fenced
 * write that stops axd at once), control notifications (`axctl dag
 * load`, malformed payloads, trigger) and a clean SIGTERM. Real axd
 * binary, throwaway cluster per test
 * (tests/e2e/e2e_harness.h).
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "e2e_harness.h"
#include "migrate.h"
#include "proc.h"

static ax_e2e *e;

static void
setup(void)
{
	setenv("AX_SCHEDULER_LEASE_TTL", "2s", 1);
	e = NULL;
}

static void
teardown(void)
{
	ax_e2e_free(e);
	e = NULL;
}

TestSuite(axd, .init = setup, .fini = teardown, .timeout = 120);

/* Whether the file at path contains needle. */
static int
file_has(const char *path, const char *needle)
{
	char   buf[1 << 16];
	FILE  *f = fopen(path, "r");
	size_t n;
	int    found = 0;

	if (f == NULL)
		return 0;
	/* logs here stay small; scan in overlapping windows anyway */
	while ((n = fread(buf, 1, sizeof(buf) - 1, f)) > 0) {
		buf[n] = '\0';
		if (strstr(buf, needle) != NULL) {
			found = 1;
			break;
		}
		if (n == sizeof(buf) - 1)
			fseek(f, -256, SEEK_CUR);
		else
			break;
	}
	fclose(f);
	return found;
}

/* Waits up to secs for path to contain needle; fails the test else. */
static void
wait_log(const char *path, const char *needle, double secs)
{
	int64_t end = ax_clock_mono_us() + (int64_t) (secs * 1e6);

	while (!file_has(path, needle)) {
		if (ax_clock_mono_us() > end) {
			ax_e2e_dump(e);
			cr_assert_fail(
			    "'%s' did not appear in %s within %.0f s", needle,
			    path, secs);
		}
		ax_clock_sleep_us(50000);
	}
}

/* Starts another axd on e's config, output to log (name "axd-2"). */
static void
start_second(ax_proc *p, char *log, size_t len, const char *const *env)
{
	char         bin[PATH_MAX];
	ax_proc_opts o = { .env = env };

	snprintf(log, len, "%s/axd-2.log", e->st.log_dir);
	cr_assert_eq(ax_proc_find_bin("axd", bin, sizeof(bin)), AX_OK, "%s",
	             ax_err_detail());
	char *argv[] = { "axd", "--config", e->st.config, NULL };
	cr_assert_eq(ax_proc_start(p, "axd-2", bin, argv, log, &o), AX_OK,
	             "%s", ax_err_detail());
}

static void
notify(const char *payload)
{
	const char *params[] = { payload };
	PGresult *r = PQexecParams(e->db, "SELECT pg_notify('ax_control', $1)",
	                           1, NULL, params, NULL, NULL, 0);
	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s",
	             PQerrorMessage(e->db));
	PQclear(r);
}

/* ---------------------------------------------------------------------- */

Test(axd, serves_control_and_stops_cleanly_on_sigterm)
{
	char log[PATH_MAX + 32], at[32], yaml[512];

	e = ax_e2e_new(0, NULL);
	snprintf(log, sizeof(log), "%s/axd.log", e->st.log_dir);
	ax_e2e_start_axd(e);
	wait_log(log, "axd ready: queue ", 10);
	cr_assert(file_has(log, e->st.queue_addr),
	          "the ready line names the queue address %s",
	          e->st.queue_addr);

	/* `axctl dag load` (no explicit NOTIFY here: the load sends it) */
	snprintf(yaml, sizeof(yaml),
	         "kind: DAG\nname: e2e.axd\nschedule: {at: \"%s\"}\n"
	         "tasks:\n  - {name: a, command: \"true\"}\n",
	         ax_e2e_at(2, at, sizeof(at)));
	ax_e2e_load(e, "axd", NULL, yaml);
	ax_e2e_wait(e, 15, "the loaded DAG's schedule to fire",
	            "SELECT count(*) FROM dag_runs r JOIN dags d ON d.id = "
	            "r.dag_id WHERE d.name = 'e2e.axd' AND r.run_type = "
	            "'scheduled'");

	/* malformed payloads are dropped; axd goes on */
	notify("not json");
	notify("{\"op\":\"kill\"}");
	notify("{\"op\":\"explode\",\"dag\":\"e2e.axd\"}");
	wait_log(log, "unknown op 'explode'", 10);
	cr_assert(file_has(log, "\\\"instance_id\\\" must be a positive"),
	          "the kill without instance_id is reported");

	/* a trigger reaches the time detector: a manual run */
	notify("{\"op\":\"trigger\",\"dag\":\"e2e.axd\","
	       "\"logical_date_us\":1000000000000000,\"params\":{\"x\":1}}");
	ax_e2e_wait(e, 10, "the manual run",
	            "SELECT count(*) FROM dag_runs r JOIN dags d ON d.id = "
	            "r.dag_id WHERE d.name = 'e2e.axd' AND r.run_type = "
	            "'manual'");

	/* SIGTERM: exit 0, lease released */
	e->st.axd.stopping = 1;
	ax_proc_signal(&e->st.axd, SIGTERM);
	cr_assert_eq(ax_proc_wait(&e->st.axd, 20 * AX_USEC_PER_SEC), AX_OK);
	cr_assert(WIFEXITED(e->st.axd.status) &&
	              WEXITSTATUS(e->st.axd.status) == 0,
	          "axd exits 0 after SIGTERM (status 0x%x)", e->st.axd.status);
	cr_assert(file_has(log, "axd stopped: drained=yes"));
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM scheduler_lease "
	                        "WHERE expires_at > now()"),
	             0, "the lease is released at stop");
}

Test(axd, refuses_unmigrated_and_newer_schemas)
{
	char      dsn[1024], env0[1100], log[PATH_MAX + 32];
	ax_proc   p;
	PGresult *r;

	e = ax_e2e_new(0, NULL);
	r = PQexec(e->db, "CREATE DATABASE unmigrated");
	cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s",
	             PQerrorMessage(e->db));
	PQclear(r);
	/* a later dbname keyword overrides the first in a conninfo string */
	snprintf(dsn, sizeof(dsn), "%s dbname=unmigrated",
	         ax_test_pg_dsn(e->pg));
	snprintf(env0, sizeof(env0), "AX_DSN=%s", dsn);
	const char *env[] = { env0, NULL };
	start_second(&p, log, sizeof(log), env);
	cr_assert_eq(ax_proc_wait(&p, 20 * AX_USEC_PER_SEC), AX_OK);
	cr_assert(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 1,
	          "exit 1 on an unmigrated database");
	cr_assert(file_has(log, "not migrated (schema version 0"),
	          "message names the problem");
	cr_assert(file_has(log, "axctl db migrate"), "and what to do");

	/* a schema newer than the binary */
	cr_assert_eq(ax_migrate_run(dsn, NULL), AX_OK, "%s", ax_err_detail());
	PGconn *c = PQconnectdb(dsn);
	r         = PQexec(c,
	                   "INSERT INTO schema_migrations (version, name, "
	                           "checksum) VALUES (999, '0999_future.sql', 'x')");
	cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s",
	             PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
	unlink(log);
	start_second(&p, log, sizeof(log), env);
	cr_assert_eq(ax_proc_wait(&p, 20 * AX_USEC_PER_SEC), AX_OK);
	cr_assert(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 1);
	cr_assert(file_has(log, "newer than this axd"), "newer schema named");
	cr_assert(file_has(log, "upgrade axd"));
}

Test(axd, one_scheduler_per_database_standby_takes_over)
{
	char    log2[PATH_MAX + 32], pid[48], holder[256];
	ax_proc p;

	e = ax_e2e_new(0, NULL);
	ax_e2e_start_axd(e);
	int64_t epoch = ax_e2e_int(e, "SELECT epoch FROM scheduler_lease");
	start_second(&p, log2, sizeof(log2), NULL);
	wait_log(log2, "standby: the scheduler lease is held by", 10);
	/* a standby builds nothing: no ready line, lease unchanged */
	ax_clock_sleep_us(2500000); /* > lease_ttl: the first renews it */
	cr_assert(ax_proc_poll(&p), "the standby keeps waiting");
	cr_assert(!file_has(log2, "axd ready"),
	          "the standby does not "
	          "schedule");
	cr_assert_eq(ax_e2e_int(e, "SELECT epoch FROM scheduler_lease"), epoch,
	             "the first axd keeps the lease");

	/* kill -9 the active one: the standby takes over once it lapses */
	ax_e2e_kill_axd(e, SIGKILL);
	wait_log(log2, "axd ready", 15);
	snprintf(pid, sizeof(pid), "pid %ld", (long) p.pid);
	ax_e2e_text(e, holder, sizeof(holder),
	            "SELECT holder FROM scheduler_lease");
	cr_assert(strstr(holder, pid) != NULL, "holder '%s' is the standby",
	          holder);
	cr_assert_gt(ax_e2e_int(e, "SELECT epoch FROM scheduler_lease"), epoch,
	             "the epoch moved on");

	/* another scheduler takes the lease: this one stops, exit 1 */
	PQclear(PQexec(e->db,
	               "UPDATE scheduler_lease SET epoch = epoch + 1, "
	               "holder = 'thief', expires_at = now() + "
	               "interval '1 minute'"));
	cr_assert_eq(ax_proc_wait(&p, 10 * AX_USEC_PER_SEC), AX_OK,
	             "axd stops when its lease is taken over");
	cr_assert(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 1);
	cr_assert(file_has(log2, "LEASE_LOST"));
}

/*
 * Fencing: another scheduler takes the lease (the epoch moves on) while
 * this axd still believes it holds it (its next renewal is 20 s away).
 * Its next write, the run of a trigger, is fenced: nothing is written,
 * and axd stops at once with exit 1 instead of at that renewal.
 */
Test(axd, a_fenced_write_stops_axd_and_writes_nothing)
{
	char log[PATH_MAX + 32];

	setenv("AX_SCHEDULER_LEASE_TTL", "60s", 1);
	e = ax_e2e_new(0, NULL);
	snprintf(log, sizeof(log), "%s/axd.log", e->st.log_dir);
	ax_e2e_load(e, "fence", NULL,
	            "kind: DAG\nname: e2e.fence\n"
	            "tasks:\n  - {name: a, command: \"true\"}\n");
	ax_e2e_start_axd(e);
	wait_log(log, "axd ready: queue ", 10);
	e->st.axd.stopping = 1;
	PQclear(PQexec(e->db,
	               "UPDATE scheduler_lease SET epoch = epoch + 1, "
	               "holder = 'thief', expires_at = now() + "
	               "interval '1 minute'"));
	int64_t epoch = ax_e2e_int(e, "SELECT epoch FROM scheduler_lease");
	notify("{\"op\":\"trigger\",\"dag\":\"e2e.fence\","
	       "\"logical_date_us\":1000000000000000}");
	cr_assert_eq(ax_proc_wait(&e->st.axd, 15 * AX_USEC_PER_SEC), AX_OK,
	             "axd did not stop after a fenced write");
	cr_assert(WIFEXITED(e->st.axd.status) &&
	              WEXITSTATUS(e->st.axd.status) == 1,
	          "exit 1 when fenced (status 0x%x)", e->st.axd.status);
	cr_assert(file_has(log, "FENCED"), "the fenced write is logged");
	cr_assert(file_has(log, "a write of this axd was fenced"));
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM dag_runs r JOIN dags "
	                        "d ON d.id = r.dag_id WHERE d.name = "
	                        "'e2e.fence'"),
	             0, "the deposed axd created the triggered run");
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM scheduler_lease WHERE "
	                        "holder = 'thief' AND epoch = %lld",
	                        (long long) epoch),
	             1, "the deposed axd touched the new holder's lease");
}
