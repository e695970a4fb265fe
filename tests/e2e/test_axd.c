/*
 * test_axd.c - axd as a process (actors/axd.c): start-up checks, the
 * scheduler lease (standby, a lease moved by hand, a fenced write that
 * stops scheduling at once), control notifications (`axctl dag load`,
 * malformed payloads, trigger), a clean SIGTERM, and high availability:
 * kill -9 failover under 2 s (once with an every-second schedule checked
 * for gaps and repeats, and ten times in a row, printing the median and
 * max), a 15 s PostgreSQL outage survived by the same process, and a
 * deposed leader (SIGSTOP past its lease) that writes nothing and
 * stands by. Writes are attributed to their fence epoch by a trigger
 * (audit_writes). Real axd binaries, throwaway cluster per test
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

/* How many times needle occurs in the file at path. */
static int
count_in_file(const char *path, const char *needle)
{
	FILE  *f   = fopen(path, "r");
	char  *buf = NULL;
	size_t cap = 0;
	int    n   = 0;

	if (f == NULL)
		return 0;
	while (getline(&buf, &cap, f) > 0)
		for (const char *p = buf; (p = strstr(p, needle)) != NULL;
		     p += strlen(needle))
			n++;
	free(buf);
	fclose(f);
	return n;
}

/* Waits up to secs for needle to occur at least n times in path. */
static void
wait_count(const char *path, const char *needle, int n, double secs)
{
	int64_t end = ax_clock_mono_us() + (int64_t) (secs * 1e6);

	while (count_in_file(path, needle) < n) {
		if (ax_clock_mono_us() > end) {
			ax_e2e_dump(e);
			cr_assert_fail("'%s' did not appear %d times in %s "
			               "within %.0f s",
			               needle, n, path, secs);
		}
		ax_clock_sleep_us(20000);
	}
}

static void
exec_ok(const char *sql)
{
	PGresult *r = PQexec(e->db, sql);
	cr_assert(PQresultStatus(r) == PGRES_COMMAND_OK ||
	              PQresultStatus(r) == PGRES_TUPLES_OK,
	          "%s: %s", sql, PQerrorMessage(e->db));
	PQclear(r);
}

/*
 * Records every row write of the pipeline's tables in test_writes with
 * the writer's fence epoch (the ax.fence_epoch setting its fenced DSN
 * carries; NULL for the test's own writes) and the instant: the proof
 * that a deposed axd wrote nothing once another took over.
 */
static void
audit_writes(void)
{
	static const char *const tabs[] = { "dag_runs",  "task_instances",
		                            "attempts",  "schedules",
		                            "event_log", "workers" };
	char                     sql[512];

	exec_ok("CREATE TABLE test_writes (tab text, epoch bigint, at "
	        "timestamptz NOT NULL DEFAULT clock_timestamp())");
	exec_ok("CREATE FUNCTION test_write_audit() RETURNS trigger "
	        "LANGUAGE plpgsql AS $$ BEGIN INSERT INTO test_writes (tab, "
	        "epoch) VALUES (TG_TABLE_NAME, nullif(current_setting("
	        "'ax.fence_epoch', true), '')::bigint); RETURN NULL; END $$");
	for (size_t i = 0; i < sizeof(tabs) / sizeof(tabs[0]); i++) {
		snprintf(sql, sizeof(sql),
		         "CREATE TRIGGER test_audit AFTER INSERT OR UPDATE OR "
		         "DELETE ON %s FOR EACH ROW EXECUTE FUNCTION "
		         "test_write_audit()",
		         tabs[i]);
		exec_ok(sql);
	}
}

/* Starts another axd named name on e's config, output to log; env adds
 * variables (may be NULL). It is killed when the test process ends. */
static void
start_named(ax_proc *p, const char *name, char *log, size_t len,
            const char *const *env)
{
	char         bin[PATH_MAX];
	ax_proc_opts o = { .env = env, .pdeathsig = SIGKILL };

	snprintf(log, len, "%s/%s.log", e->st.log_dir, name);
	cr_assert_eq(ax_proc_find_bin("axd", bin, sizeof(bin)), AX_OK, "%s",
	             ax_err_detail());
	char *argv[] = { "axd", "--config", e->st.config, NULL };
	cr_assert_eq(ax_proc_start(p, name, bin, argv, log, &o), AX_OK, "%s",
	             ax_err_detail());
}

/* Starts another axd on e's config, output to log (name "axd-2"). */
static void
start_second(ax_proc *p, char *log, size_t len, const char *const *env)
{
	start_named(p, "axd-2", log, len, env);
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
	         "params: {x: 0}\n"
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

	/* a history setting out of range (a year at most): refused when the
	 * configuration loads, the key named */
	const char *bad[] = { "AX_HISTORY_HOT_HOURS=9000", NULL };
	unlink(log);
	start_second(&p, log, sizeof(log), bad);
	cr_assert_eq(ax_proc_wait(&p, 20 * AX_USEC_PER_SEC), AX_OK);
	cr_assert(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 2,
	          "exit 2 on a bad setting (status 0x%x)", p.status);
	cr_assert(file_has(log, "key 'history.hot_hours': 9000 is hours"),
	          "the setting is named");
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

	/* the epoch moved by hand (no leadership lock): this axd stops
	 * scheduling at its next renewal and goes back to standby, not out;
	 * holding the lock is the right to the lease, so it takes it again
	 * with a newer epoch */
	PQclear(PQexec(e->db,
	               "UPDATE scheduler_lease SET epoch = epoch + 1, "
	               "holder = 'thief', expires_at = now() + "
	               "interval '1 minute'"));
	int64_t thief = ax_e2e_int(e, "SELECT epoch FROM scheduler_lease");
	wait_log(log2, "LEASE_LOST", 10);
	wait_log(log2, "back to standby", 10);
	ax_e2e_wait(e, 10, "the axd to take the lease again",
	            "SELECT count(*) FROM scheduler_lease WHERE epoch > %lld "
	            "AND holder LIKE '%%%s'",
	            (long long) thief, pid);
	wait_count(log2, "axd ready", 2, 10); /* a fresh pipeline */
	cr_assert(ax_proc_poll(&p),
	          "axd does not exit when its lease is lost");
	ax_proc_stop(&p, 10 * AX_USEC_PER_SEC);
	cr_assert(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0);
}

/*
 * Fencing: another scheduler takes the lease (the epoch moves on) while
 * this axd still believes it holds it (its next renewal is 20 s away).
 * Its next write, the run of a trigger, is fenced: nothing is written
 * under the old epoch, and axd stops scheduling at once instead of at
 * that renewal, and goes back to standby (it does not exit).
 */
Test(axd, a_fenced_write_stops_scheduling_and_writes_nothing)
{
	char log[PATH_MAX + 32];

	setenv("AX_SCHEDULER_LEASE_TTL", "60s", 1);
	e = ax_e2e_new(0, NULL);
	audit_writes();
	snprintf(log, sizeof(log), "%s/axd.log", e->st.log_dir);
	ax_e2e_load(e, "fence", NULL,
	            "kind: DAG\nname: e2e.fence\n"
	            "tasks:\n  - {name: a, command: \"true\"}\n");
	ax_e2e_start_axd(e);
	wait_log(log, "axd ready: queue ", 10);
	int64_t deposed = ax_e2e_int(e, "SELECT epoch FROM scheduler_lease");
	PQclear(PQexec(e->db,
	               "UPDATE scheduler_lease SET epoch = epoch + 1, "
	               "holder = 'thief', expires_at = now() + "
	               "interval '1 minute'"));
	int64_t epoch = ax_e2e_int(e, "SELECT epoch FROM scheduler_lease");
	char    bumped[64];
	ax_e2e_text(e, bumped, sizeof(bumped), "SELECT clock_timestamp()");
	notify("{\"op\":\"trigger\",\"dag\":\"e2e.fence\","
	       "\"logical_date_us\":1000000000000000}");
	wait_log(log, "a write of this axd was fenced", 10);
	cr_assert(file_has(log, "FENCED"), "the fenced write is logged");
	wait_log(log, "back to standby", 10);
	ax_e2e_wait(e, 10, "the axd to lead again",
	            "SELECT count(*) FROM scheduler_lease WHERE epoch = %lld "
	            "AND holder LIKE 'axd %%'",
	            (long long) epoch + 1);
	cr_assert(ax_proc_poll(&e->st.axd), "axd stays up");
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM test_writes WHERE "
	                        "epoch = %lld AND at > '%s'",
	                        (long long) deposed, bumped),
	             0, "the deposed epoch wrote after the takeover");
}

/* ---------------------------------------------------------------------- */
/* high availability: failover, database outages, a deposed leader */

/* A DAG that runs every second and catches up what it missed. */
static const char every_second[] =
    "kind: DAG\nname: e2e.tick\nschedule: {cron: \"* * * * * ?\"}\n"
    "catchup: true\ntasks:\n  - {name: a, command: \"true\"}\n";

/* The scheduled runs of e2e.tick. */
static int64_t
tick_runs(void)
{
	return ax_e2e_int(e,
	                  "SELECT count(*) FROM dag_runs r JOIN dags d ON "
	                  "d.id = r.dag_id WHERE d.name = 'e2e.tick' AND "
	                  "r.run_type = 'scheduled'");
}

/*
 * Fails unless the scheduled runs of e2e.tick are one per second from the
 * first to the last (no period skipped), each logical time once, and
 * the last one at most 3 s old (scheduling goes on). Returns their count.
 */
static int64_t
assert_every_second(const char *when)
{
	int64_t n = tick_runs();
	int64_t gaps =
	    ax_e2e_int(e,
	               "SELECT count(*) FROM (SELECT r.logical_date - "
	               "lag(r.logical_date) OVER (ORDER BY "
	               "r.logical_date) AS d FROM dag_runs r JOIN dags g "
	               "ON g.id = r.dag_id WHERE g.name = 'e2e.tick' AND "
	               "r.run_type = 'scheduled') x WHERE d <> interval "
	               "'1 second'");
	int64_t twice = ax_e2e_int(
	    e,
	    "SELECT count(*) - count(DISTINCT r.logical_date) FROM dag_runs "
	    "r JOIN dags g ON g.id = r.dag_id WHERE g.name = 'e2e.tick'");
	int64_t late = ax_e2e_int(
	    e,
	    "SELECT count(*) FROM dag_runs r JOIN dags g ON g.id = "
	    "r.dag_id WHERE g.name = 'e2e.tick' HAVING max(r.logical_date) "
	    "< now() - interval '3 seconds'");

	if (gaps != 0 || twice != 0 || late > 0) {
		ax_e2e_dump(e);
		cr_assert_fail("%s: %lld runs, %lld gaps, %lld logical times "
		               "twice, last one older than 3 s: %s",
		               when, (long long) n, (long long) gaps,
		               (long long) twice, late > 0 ? "yes" : "no");
	}
	return n;
}

/* Waits until e2e.tick has at least n more scheduled runs than now. */
static void
wait_more_runs(int64_t n, double secs)
{
	ax_e2e_wait(e, secs, "more scheduled runs of e2e.tick",
	            "SELECT count(*) >= %lld FROM dag_runs r JOIN dags d ON "
	            "d.id = r.dag_id WHERE d.name = 'e2e.tick' AND "
	            "r.run_type = 'scheduled'",
	            (long long) (tick_runs() + n));
}

/* Milliseconds from t0 (mono) until log holds needle n times. */
static int64_t
ms_until(int64_t t0, const char *log, const char *needle, int n)
{
	wait_count(log, needle, n, 10);
	return (ax_clock_mono_us() - t0) / AX_USEC_PER_MSEC;
}

/*
 * kill -9 of the active axd: the standby holds the leadership lock the
 * moment the active's session ends, so it is ready within 2 s although
 * the lease row (10 s) is still valid, schedules again at once, and the
 * every-second schedule shows no gap and no repeat; the deposed epoch
 * wrote nothing after the takeover.
 */
Test(axd, kill9_failover_under_2s_without_gap)
{
	char    log2[PATH_MAX + 32], killed[64];
	ax_proc p;

	setenv("AX_SCHEDULER_LEASE_TTL", "10s", 1);
	e = ax_e2e_new(0, NULL);
	audit_writes();
	ax_e2e_load(e, "tick", NULL, every_second);
	ax_e2e_start_axd(e);
	int64_t first = ax_e2e_int(e, "SELECT epoch FROM scheduler_lease");
	start_second(&p, log2, sizeof(log2), NULL);
	wait_log(log2, "standby: the scheduler lease is held by", 10);
	wait_more_runs(3, 10);
	assert_every_second("before the failover");

	ax_e2e_text(e, killed, sizeof(killed), "SELECT clock_timestamp()");
	int64_t t0 = ax_clock_mono_us();
	ax_e2e_kill_axd(e, SIGKILL);
	int64_t ready_ms = ms_until(t0, log2, "axd ready", 1);
	int64_t sched_ms = ax_e2e_int(
	    e,
	    "SELECT (extract(epoch FROM min(at) - '%s') * 1000)::bigint "
	    "FROM test_writes WHERE tab = 'dag_runs' AND epoch > %lld",
	    killed, (long long) first);
	cr_log_info("failover: ready %lld ms, first run written %lld ms "
	            "after kill -9",
	            (long long) ready_ms, (long long) sched_ms);
	cr_assert_lt(ready_ms, 2000, "the standby was ready after %lld ms",
	             (long long) ready_ms);
	wait_more_runs(3, 10);
	sched_ms = ax_e2e_int(
	    e,
	    "SELECT (extract(epoch FROM min(at) - '%s') * 1000)::bigint "
	    "FROM test_writes WHERE tab = 'dag_runs' AND epoch > %lld",
	    killed, (long long) first);
	cr_assert(sched_ms >= 0 && sched_ms < 2000,
	          "the new leader wrote its first run %lld ms after the kill",
	          (long long) sched_ms);
	assert_every_second("after the failover");
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM test_writes WHERE "
	                        "epoch = %lld AND at > (SELECT acquired_at "
	                        "FROM scheduler_lease)",
	                        (long long) first),
	             0, "the killed axd's epoch wrote after the takeover");
	ax_proc_stop(&p, 10 * AX_USEC_PER_SEC);
}

/* Sorts n int64 in place (insertion sort: n is small). */
static void
sort_i64(int64_t *v, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
			int64_t t = v[j];
			v[j]      = v[j - 1];
			v[j - 1]  = t;
		}
}

/*
 * Ten kill -9 failovers in a row, each to a fresh standby: prints the
 * time from the kill to the standby's ready line (median and max).
 */
Test(axd, kill9_failover_ten_times, .timeout = 240)
{
	enum { N = 10 };
	char    log[2][PATH_MAX + 32], name[32];
	ax_proc p[2];
	int64_t ms[N];
	int     cur = -1; /* -1: the harness's axd is the active one */

	setenv("AX_SCHEDULER_LEASE_TTL", "10s", 1);
	e = ax_e2e_new(0, NULL);
	ax_e2e_load(e, "tick", NULL, every_second);
	ax_e2e_start_axd(e);
	memset(p, 0, sizeof(p));
	for (int i = 0; i < N; i++) {
		int nxt = cur == 0 ? 1 : 0;
		snprintf(name, sizeof(name), "axd-ha%d-%d", i, nxt);
		start_named(&p[nxt], name, log[nxt], sizeof(log[nxt]), NULL);
		wait_log(log[nxt], "standby: the scheduler lease is held", 10);
		int64_t t0 = ax_clock_mono_us();
		if (cur < 0)
			ax_e2e_kill_axd(e, SIGKILL);
		else {
			ax_proc_signal(&p[cur], SIGKILL);
			cr_assert_eq(
			    ax_proc_wait(&p[cur], 10 * AX_USEC_PER_SEC),
			    AX_OK);
		}
		ms[i] = ms_until(t0, log[nxt], "axd ready", 1);
		cur   = nxt;
	}
	sort_i64(ms, N);
	fprintf(stderr,
	        "kill -9 failover over %d runs: median %lld ms, max %lld ms, "
	        "min %lld ms\n",
	        N, (long long) (ms[N / 2 - 1] + ms[N / 2]) / 2,
	        (long long) ms[N - 1], (long long) ms[0]);
	cr_assert_lt((ms[N / 2 - 1] + ms[N / 2]) / 2, 2000,
	             "median failover under 2 s");
	wait_more_runs(2, 10);
	assert_every_second("after ten failovers");
	ax_proc_stop(&p[cur], 10 * AX_USEC_PER_SEC);
}

/*
 * PostgreSQL stopped (fast shutdown) for 15 s under a running axd (lease
 * 2 s) and a worker: axd stops scheduling, keeps its process, reconnects
 * with backoff when the server is back, takes the lease again, builds a
 * fresh pipeline (the queue listens again, the worker comes back to it)
 * and schedules every period it missed (catchup): no gap, no repeat,
 * same pid, and the runs after the outage succeed. AX_TEST_OUTAGE_S sets
 * another length (up to 420 s), e.g. 300 to measure a 5-minute outage by
 * hand: AX_TEST_OUTAGE_S=300 AX_BIN_DIR=build build/tests/test_axd
 * --filter 'axd/survives*'.
 */
Test(axd, survives_a_database_outage_in_the_same_process, .timeout = 480)
{
	char        log[PATH_MAX + 32], back[64];
	const char *len  = getenv("AX_TEST_OUTAGE_S");
	int64_t     secs = len != NULL ? strtoll(len, NULL, 10) : 15;

	e = ax_e2e_new(1, NULL);
	snprintf(log, sizeof(log), "%s/axd.log", e->st.log_dir);
	ax_e2e_load(e, "tick", NULL, every_second);
	ax_e2e_start_axd(e);
	ax_e2e_start_workers(e);
	wait_log(log, "axd ready", 10);
	ax_e2e_wait(e, 15, "a run to succeed before the outage",
	            "SELECT count(*) FROM dag_runs WHERE state = 'SUCCESS'");
	pid_t pid = e->st.axd.pid;

	cr_assert_eq(ax_pg_embed_down(ax_test_pg_embed(e->pg)), AX_OK, "%s",
	             ax_err_detail());
	wait_log(log, "LEASE_LOST", 5);
	if (secs < 1 || secs > 420)
		secs = 15;
	ax_clock_sleep_us(secs * AX_USEC_PER_SEC);
	cr_assert(ax_proc_poll(&e->st.axd),
	          "axd exited during the outage (status 0x%x)",
	          e->st.axd.status);
	cr_assert_eq(ax_pg_embed_up(ax_test_pg_embed(e->pg)), AX_OK, "%s",
	             ax_err_detail());
	PQreset(e->db);
	cr_assert_eq(PQstatus(e->db), CONNECTION_OK, "%s",
	             PQerrorMessage(e->db));
	ax_e2e_text(e, back, sizeof(back), "SELECT now()");
	int64_t t0 = ax_clock_mono_us();
	wait_count(log, "axd ready", 2, 15);
	cr_log_info(
	    "outage of %lld s: axd ready again %lld ms after the "
	    "server was back",
	    (long long) secs,
	    (long long) ((ax_clock_mono_us() - t0) / AX_USEC_PER_MSEC));
	cr_assert(ax_proc_poll(&e->st.axd) && e->st.axd.pid == pid,
	          "the same axd process schedules again");
	wait_more_runs(3, 10);
	assert_every_second("after the outage");
	ax_e2e_wait(e, 30, "a run after the outage to succeed",
	            "SELECT count(*) FROM dag_runs WHERE state = 'SUCCESS' "
	            "AND logical_date > '%s'",
	            back);
}

/*
 * A deposed leader: the active axd is stopped (SIGSTOP) past its lease;
 * the standby ends its session, takes over and schedules; the stopped
 * one, resumed (SIGCONT), sees its session gone, writes nothing under
 * its old epoch and goes back to standby (it does not exit); killed in
 * turn, the new leader hands back to it within 2 s.
 */
Test(axd, a_deposed_leader_writes_nothing_and_stands_by)
{
	char    log[PATH_MAX + 32], log2[PATH_MAX + 32], addr[PATH_MAX + 64];
	char    pub[PATH_MAX + 64];
	ax_proc p;

	e = ax_e2e_new(0, NULL);
	audit_writes();
	snprintf(log, sizeof(log), "%s/axd.log", e->st.log_dir);
	ax_e2e_load(e, "tick", NULL, every_second);
	ax_e2e_start_axd(e);
	wait_log(log, "axd ready", 10);
	int64_t deposed = ax_e2e_int(e, "SELECT epoch FROM scheduler_lease");
	/* another host's addresses: the stopped one keeps its own bound */
	snprintf(addr, sizeof(addr), "AX_QUEUE_ADDRESS=ipc://%s/run/q2.ipc",
	         e->st.home);
	snprintf(pub, sizeof(pub), "AX_EVENTS_PUB=ipc://%s/run/ev2.ipc",
	         e->st.home);
	const char *env[] = { addr, pub, NULL };
	start_second(&p, log2, sizeof(log2), env);
	wait_log(log2, "standby: the scheduler lease is held by", 10);
	wait_more_runs(2, 10);

	ax_proc_signal(&e->st.axd, SIGSTOP);
	wait_log(log2, "axd ready", 15);
	cr_assert(file_has(log2, "the holder hangs; ending that session"),
	          "the standby ended the hung leader's session");
	wait_more_runs(3, 10);
	ax_proc_signal(&e->st.axd, SIGCONT);
	wait_log(log, "back to standby", 10);
	cr_assert(file_has(log, "LEASE_LOST"));
	wait_count(log, "standby: the scheduler lease is held by", 1, 10);
	cr_assert(ax_proc_poll(&e->st.axd), "the deposed axd stays up");
	cr_assert_eq(count_in_file(log, "axd ready"), 1,
	             "the deposed axd does not schedule again");
	wait_more_runs(2, 10);
	assert_every_second("after the takeover");
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM test_writes WHERE "
	                        "epoch = %lld AND at > (SELECT acquired_at "
	                        "FROM scheduler_lease)",
	                        (long long) deposed),
	             0, "the deposed axd wrote under its old epoch");

	/* the deposed one is a working standby */
	int64_t t0 = ax_clock_mono_us();
	ax_proc_signal(&p, SIGKILL);
	cr_assert_eq(ax_proc_wait(&p, 10 * AX_USEC_PER_SEC), AX_OK);
	int64_t back = ms_until(t0, log, "axd ready", 2);
	cr_assert_lt(back, 2000, "the old leader took over after %lld ms",
	             (long long) back);
	wait_more_runs(2, 10);
	assert_every_second("after the second takeover");
}

/*
 * While it leads, axd moves the rows of runs that finished
 * history.hot_hours ago to the month-partitioned history (at its first
 * lease renewal, then hourly): with hot_hours 0, the runs that finished
 * before axd restarted are in history after its first renewal (or the
 * previous leader's, for a run that ended early enough), read whole through
 * the views, and the pipeline's tables hold none of their rows. (Runs
 * older than history.retention_days are retention's to delete, not
 * moved: these are of the last two days.)
 */
Test(axd, a_leading_axd_moves_finished_runs_to_history)
{
	char log[PATH_MAX + 32];

	e = ax_e2e_new(1, "history:\n  hot_hours: 0\n");
	snprintf(log, sizeof(log), "%s/axd.log", e->st.log_dir);
	ax_e2e_load(e, "hist", NULL,
	            "kind: DAG\nname: e2e.hist\ntasks:\n"
	            "  - {name: a, command: \"true\"}\n"
	            "  - {name: b, command: \"true\", depends_on: [a]}\n");
	ax_e2e_int(e,
	           "WITH r AS (INSERT INTO dag_runs (dag_id, "
	           "dag_version_id, run_type, logical_date, interval_start, "
	           "interval_end) SELECT d.id, v.id, 'manual', t, t, t FROM "
	           "dags d JOIN dag_versions v ON v.dag_id = d.id, "
	           "unnest(ARRAY[now() - interval '2 days', now() - "
	           "interval '1 day']) t RETURNING 1) SELECT count(*) FROM r");
	ax_e2e_start_axd(e);
	ax_e2e_start_workers(e);
	ax_e2e_wait(e, 60, "both runs to succeed",
	            "SELECT count(*) = 2 FROM dag_runs WHERE state = "
	            "'SUCCESS'");
	ax_e2e_wait(
	    e, 10, "their attempts to close",
	    "SELECT count(*) = 0 FROM attempts WHERE ended_at IS NULL");
	ax_e2e_kill_axd(e, SIGTERM);
	ax_e2e_start_axd(e);
	ax_e2e_wait(
	    e, 30, "the leader to move both runs",
	    "SELECT count(*) = 2 FROM dag_runs WHERE history_at IS NOT "
	    "NULL");
	cr_assert_eq(ax_e2e_int(e, "SELECT count(*) FROM task_instances"), 0);
	cr_assert_eq(ax_e2e_int(e, "SELECT count(*) FROM attempts"), 0);
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM "
	                        "task_instances_history_default"),
	             0, "every row in its month's partition");
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM attempts_all a JOIN "
	                        "task_instances_all t ON t.id = "
	                        "a.instance_id WHERE a.state = 'SUCCESS'"),
	             4);
	/* logged; under load the first leader may have moved the first run
	 * at a renewal of its own before the second one ended */
	wait_log(log, "finished run(s) to history", 10);
}

/*
 * The move is one transaction per batch of whole runs: a kill -9 of the
 * leader in the middle of moving 20,000 finished runs leaves every run's
 * instances and attempts either all hot or all in history, none lost or
 * copied twice; the next leader moves the rest.
 */
Test(axd, a_kill9_during_the_move_splits_no_run, .timeout = 180)
{
	static const char counts[] =
	    "SELECT (SELECT count(*) FROM task_instances_all) * 1000000 + "
	    "(SELECT count(*) FROM attempts_all)";
	/* runs whose rows are split between hot and history, or whose
	 * history_at disagrees with where they are */
	static const char split[] =
	    "SELECT count(*) FROM dag_runs r WHERE "
	    "(EXISTS (SELECT 1 FROM task_instances t WHERE t.dag_run_id = "
	    "r.id) AND (r.history_at IS NOT NULL OR EXISTS (SELECT 1 FROM "
	    "task_instances_history h WHERE h.dag_run_id = r.id))) OR "
	    "(r.history_at IS NOT NULL AND EXISTS (SELECT 1 FROM attempts a "
	    "JOIN task_instances t ON t.id = a.instance_id WHERE "
	    "t.dag_run_id = r.id)) OR (r.history_at IS NULL AND EXISTS "
	    "(SELECT 1 FROM attempts_history a WHERE a.instance_id IN "
	    "(SELECT id FROM task_instances_history h WHERE h.dag_run_id = "
	    "r.id)))";

	e = ax_e2e_new(0, "history:\n  hot_hours: 0\n");
	ax_e2e_load(e, "hist", NULL,
	            "kind: DAG\nname: e2e.hist\ntasks:\n"
	            "  - {name: a, command: \"true\"}\n"
	            "  - {name: b, command: \"true\", depends_on: [a]}\n");
	/* 20,000 runs of the last days, finished, two instances with an
	 * attempt each */
	ax_e2e_int(
	    e,
	    "WITH r AS (INSERT INTO dag_runs (dag_id, dag_version_id, "
	    "run_type, logical_date, interval_start, interval_end, "
	    "state, started_at, ended_at) SELECT d.id, v.id, 'manual', "
	    "t, t, t, 'SUCCESS', t, t + interval '1 s' FROM dags d JOIN "
	    "dag_versions v ON v.dag_id = d.id, (SELECT now() - "
	    "interval '3 days' + g * interval '1 s' AS t FROM "
	    "generate_series(1, 20000) g) x RETURNING id, dag_id, "
	    "logical_date), i AS (INSERT INTO task_instances "
	    "(dag_run_id, dag_id, task, logical_time, state, "
	    "try_number) SELECT r.id, r.dag_id, k, r.logical_date, "
	    "'SUCCESS', 1 FROM r, unnest(ARRAY['a', 'b']) k RETURNING "
	    "id, logical_time) INSERT INTO attempts (run_id, "
	    "instance_id, number, state, due_at, ended_at) SELECT "
	    "gen_random_uuid(), i.id, 1, 'SUCCESS', i.logical_time, "
	    "i.logical_time FROM i RETURNING 0");
	int64_t before = ax_e2e_int(e, counts);
	cr_assert_eq(before, 40000LL * 1000000 + 40000);
	ax_e2e_start_axd(e);
	ax_e2e_wait(e, 60, "the leader to have moved some runs",
	            "SELECT count(*) >= 500 FROM dag_runs WHERE history_at IS "
	            "NOT NULL");
	ax_e2e_kill_axd(e, SIGKILL);
	int64_t moved = ax_e2e_int(e,
	                           "SELECT count(*) FROM dag_runs WHERE "
	                           "history_at IS NOT NULL");
	fprintf(stderr, "move: %lld of 20000 runs moved at the kill -9\n",
	        (long long) moved);
	cr_assert_lt(moved, 20000, "the kill came too late to test anything");
	cr_assert_eq(ax_e2e_int(e, split), 0, "a run split by the kill");
	cr_assert_eq(ax_e2e_int(e, counts), before, "rows lost or copied");
	ax_e2e_start_axd(e);
	ax_e2e_wait(
	    e, 120, "the next leader to move the rest",
	    "SELECT count(*) = 20000 FROM dag_runs WHERE history_at IS "
	    "NOT NULL");
	cr_assert_eq(ax_e2e_int(e, split), 0);
	cr_assert_eq(ax_e2e_int(e, counts), before);
	cr_assert_eq(ax_e2e_int(e, "SELECT count(*) FROM task_instances"), 0);
}
