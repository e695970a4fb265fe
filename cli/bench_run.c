/*
 * bench_run.c - the shared running parts of `axctl bench` (see
 * bench_run.h): PostgreSQL helpers, the stack of axd and workers,
 * generated DAG files, triggers and waits. Waits poll PostgreSQL (a few
 * cheap queries a second): they measure nothing themselves, the numbers
 * come from the timestamps the pipeline persisted.
 */
#include "bench_run.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"

int
ax_bench_fail(const char *what, ax_err rv)
{
	const char *d = ax_err_detail();
	fprintf(stderr, "axctl bench: %s: %s\n", what,
	        d[0] != '\0' ? d : ax_strerror(rv));
	return 1;
}

int
ax_bench_sql(ax_bench *b, const char *q)
{
	PGresult *r  = PQexec(b->db, q);
	int       ok = PQresultStatus(r) == PGRES_COMMAND_OK ||
	    PQresultStatus(r) == PGRES_TUPLES_OK;
	if (!ok)
		fprintf(stderr, "axctl bench: %s\n%s\n", PQerrorMessage(b->db),
		        q);
	PQclear(r);
	return ok ? 0 : 1;
}

double
ax_bench_sql_num(ax_bench *b, const char *q)
{
	PGresult *r = PQexec(b->db, q);
	double    v = -1;
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 &&
	    !PQgetisnull(r, 0, 0))
		v = strtod(PQgetvalue(r, 0, 0), NULL);
	PQclear(r);
	return v;
}

double
ax_bench_rss_mb(pid_t pid, const char *key)
{
	char  path[64], line[256];
	FILE *f;
	long  kb = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, key, strlen(key)) == 0)
			kb = strtol(line + strlen(key) + 1, NULL, 10);
	fclose(f);
	return kb < 0 ? -1 : (double) kb / 1024.0;
}

double
ax_bench_machine_cpu_us(void)
{
	unsigned long long v[8] = { 0 };
	FILE              *f    = fopen("/proc/stat", "r");
	int                n;
	long               hz = sysconf(_SC_CLK_TCK);

	if (f == NULL)
		return -1;
	n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
	           &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
	fclose(f);
	if (n != 8 || hz <= 0)
		return -1;
	/* v[3] idle and v[4] iowait are not work */
	return (double) (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) * 1e6 /
	    (double) hz;
}

/* utime + stime of pid in microseconds; -1 when unreadable. */
static double
proc_cpu_us(pid_t pid)
{
	char               path[64], buf[1024], *p;
	unsigned long long ut, st;
	long               hz = sysconf(_SC_CLK_TCK);
	FILE              *f;
	size_t             n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
	if (pid <= 0 || hz <= 0 || (f = fopen(path, "r")) == NULL)
		return -1;
	n      = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	/* the fields after the command name, which may hold spaces and
	 * parentheses: state is field 3, utime 14, stime 15 */
	if ((p = strrchr(buf, ')')) == NULL ||
	    sscanf(p + 1,
	           " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
	           &ut, &st) != 2)
		return -1;
	return (double) (ut + st) * 1e6 / (double) hz;
}

double
ax_bench_stack_cpu_us(const ax_bench *b)
{
	double sum = proc_cpu_us(b->st.axd.pid), v;

	for (int i = 0; sum >= 0 && i < b->st.n_workers; i++)
		sum =
		    (v = proc_cpu_us(b->st.workers[i].pid)) < 0 ? -1 : sum + v;
	return sum;
}

int
ax_bench_fresh_tables(ax_bench *b)
{
	/* Cascades to versions, schedules, runs, instances and attempts;
	 * the instance history has no foreign keys: named. */
	return ax_bench_sql(b,
	                    "TRUNCATE dags, task_templates, "
	                    "task_instances_history, attempts_history "
	                    "CASCADE");
}

int
ax_bench_load(ax_bench *b, const char                 *subdir,
              void (*write)(FILE *f, void *arg), void *arg)
{
	char  dir[PATH_MAX + 32], path[PATH_MAX + 96];
	FILE *f;
	int   bad;

	snprintf(dir, sizeof(dir), "%s/bench-%s", b->h.home, subdir);
	snprintf(path, sizeof(path), "%s/%s.yaml", dir, subdir);
	if ((mkdir(dir, 0755) != 0 && errno != EEXIST) ||
	    (f = fopen(path, "w")) == NULL)
		return ax_bench_fail(
		    "write",
		    ax_err_set(AX_EIO, "%s: %s", path, strerror(errno)));
	write(f, arg);
	bad = ferror(f);
	if (fclose(f) != 0 || bad)
		return ax_bench_fail(
		    "write",
		    ax_err_set(AX_EIO, "%s: %s", path, strerror(errno)));
	if (ax_stack_load_dags(dir, b->h.w.dsn) != 0) {
		fprintf(stderr, "axctl bench: loading %s failed\n", dir);
		return 1;
	}
	return 0;
}

int
ax_bench_start_stack(ax_bench *b, int workers)
{
	ax_stack_opts so = {
		.home         = b->h.home,
		.dsn          = b->h.w.dsn,
		.workers      = workers,
		.worker_slots = b->o.slots,
		.log_level    = b->log_level ? b->log_level : "warn",
	};
	ax_err rv;

	if ((rv = ax_stack_init(&b->st, &so)) != AX_OK)
		return ax_bench_fail("home", rv);
	if ((rv = ax_stack_start_axd(&b->st, 120 * AX_USEC_PER_SEC)) != AX_OK)
		return ax_bench_fail("axd", rv);
	if ((rv = ax_stack_start_workers(&b->st)) != AX_OK)
		return ax_bench_fail("workers", rv);
	return 0;
}

int
ax_bench_begin(ax_bench *b, const char                 *subdir,
               void (*write)(FILE *f, void *arg), void *arg)
{
	if (ax_bench_fresh_tables(b) || ax_bench_load(b, subdir, write, arg))
		return 1;
	if (ax_bench_start_stack(b, b->o.workers)) {
		ax_bench_stop_stack(b);
		return 1;
	}
	return 0;
}

void
ax_bench_stop_stack(ax_bench *b)
{
	double hwm = ax_bench_rss_mb(b->st.axd.pid, "VmHWM:");
	if (hwm > b->r.rss_mb)
		b->r.rss_mb = hwm;
	ax_stack_stop(&b->st, 10 * AX_USEC_PER_SEC);
	ax_stack_fini(&b->st);
	memset(&b->st, 0, sizeof(b->st));
}

int
ax_bench_children_dead(ax_bench *b)
{
	ax_proc *p;
	char     how[96], tail[2048];

	if (b->stop != NULL && *b->stop) {
		fprintf(stderr, "axctl bench: interrupted; stopping\n");
		return 1;
	}
	if ((p = ax_stack_check(&b->st)) == NULL)
		return 0;
	fprintf(stderr, "axctl bench: %s %s; end of %s:\n%s\n", p->name,
	        ax_proc_describe(p, how, sizeof(how)), p->log_path,
	        ax_proc_log_tail(p->log_path, 15, tail, sizeof(tail)));
	return 1;
}

int
ax_bench_trigger(ax_bench *b, const char *dag)
{
	char q[512];

	snprintf(q, sizeof(q),
	         "SELECT pg_notify('ax_control', "
	         "'{\"op\":\"trigger\",\"dag\":\"%s\"}')",
	         dag);
	return ax_bench_sql(b, q);
}

int
ax_bench_wait_runs(ax_bench *b, const char *dag, int n, int timeout_s,
                   int poll_ms)
{
	char    q[512];
	int64_t deadline = ax_clock_mono_us() + timeout_s * AX_USEC_PER_SEC;
	double  ended    = 0;

	snprintf(q, sizeof(q),
	         "SELECT count(*) FROM dag_runs r JOIN dags d ON d.id = "
	         "r.dag_id WHERE d.name = '%s' AND r.state IN ('SUCCESS', "
	         "'FAILED', 'CANCELED')",
	         dag);
	for (;;) {
		if (ax_bench_children_dead(b))
			return 1;
		if ((ended = ax_bench_sql_num(b, q)) >= n)
			return 0;
		if (ax_clock_mono_us() > deadline) {
			fprintf(
			    stderr,
			    "axctl bench: only %.0f of %d runs of %s ended "
			    "in %d s\n",
			    ended < 0 ? 0 : ended, n, dag, timeout_s);
			return 1;
		}
		ax_clock_sleep_us(poll_ms * AX_USEC_PER_MSEC);
	}
}

int
ax_bench_check_success(ax_bench *b, const char *dag, long expected)
{
	char   q[512];
	double ok, all;

	snprintf(q, sizeof(q),
	         "SELECT count(*) FILTER (WHERE i.state = 'SUCCESS') FROM "
	         "task_instances_all i JOIN dags d ON d.id = i.dag_id WHERE "
	         "d.name = '%s'",
	         dag);
	ok = ax_bench_sql_num(b, q);
	snprintf(q, sizeof(q),
	         "SELECT count(*) FROM task_instances_all i "
	         "JOIN dags d ON d.id = i.dag_id WHERE d.name = '%s'",
	         dag);
	all = ax_bench_sql_num(b, q);
	if (ok == (double) expected && all == (double) expected)
		return 0;
	fprintf(stderr,
	        "axctl bench: %s: %.0f of %.0f instances succeeded, %ld "
	        "expected\n",
	        dag, ok, all, expected);
	return 1;
}

double *
ax_bench_fetch_sorted(PGresult *r, int col, size_t *n)
{
	double *v = malloc(((size_t) PQntuples(r) + 1) * sizeof(double));
	*n        = 0;
	if (v == NULL)
		return NULL;
	for (int i = 0; i < PQntuples(r); i++)
		if (!PQgetisnull(r, i, col))
			v[(*n)++] = strtod(PQgetvalue(r, i, col), NULL);
	ax_bench_sort(v, *n);
	return v;
}

/* Every other session of the cluster, ended or not. */
#define SQL_OTHERS                                                            \
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type = "         \
	"'client backend' AND pid <> pg_backend_pid()"

/* The counters; the own session's pending counts flushed first (by the
 * previous statement: pg_stat_force_next_flush takes effect at its
 * end). */
#define SQL_WRITES                                                            \
	"SELECT coalesce(sum(n_tup_ins + n_tup_upd) FILTER (WHERE relname = " \
	"'task_instances'), 0), "                                             \
	"coalesce(sum(n_tup_ins + n_tup_upd) FILTER (WHERE relname = "        \
	"'attempts'), 0), "                                                   \
	"coalesce(sum(n_tup_ins + n_tup_upd) FILTER (WHERE relname LIKE "     \
	"'event\\_log\\_%'), 0), "                                            \
	"coalesce(sum(n_tup_ins + n_tup_upd) FILTER (WHERE relname = "        \
	"'dag_runs'), 0), "                                                   \
	"coalesce(sum(n_tup_upd - n_tup_hot_upd), 0), "                       \
	"pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0') "                \
	"FROM pg_stat_user_tables WHERE schemaname = 'public' AND (relname "  \
	"IN ('task_instances', 'attempts', 'dag_runs') OR relname LIKE "      \
	"'event\\_log\\_%')"

int
ax_bench_writes_read(ax_bench *b, ax_bench_writes *w)
{
	int64_t   until = ax_clock_mono_us() + 10 * AX_USEC_PER_SEC;
	PGresult *r;
	int       ok;

	while (ax_bench_sql_num(b, SQL_OTHERS) != 0) {
		if (ax_clock_mono_us() > until ||
		    (b->stop != NULL && *b->stop)) {
			fprintf(stderr,
			        "axctl bench: sessions of axd or the "
			        "workers still open after 10 s: writes "
			        "not counted\n");
			return 1;
		}
		ax_clock_sleep_us(20 * AX_USEC_PER_MSEC);
	}
	if (ax_bench_sql(b, "SELECT pg_stat_force_next_flush()"))
		return 1;
	r  = PQexec(b->db, SQL_WRITES);
	ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
	if (ok) {
		double *v[] = { &w->ti,   &w->att,    &w->ev,
			        &w->runs, &w->nonhot, &w->wal };
		for (int k = 0; k < 6; k++)
			*v[k] = strtod(PQgetvalue(r, 0, k), NULL);
	} else
		fprintf(stderr, "axctl bench: writes not counted: %s\n",
		        PQerrorMessage(b->db));
	PQclear(r);
	return ok ? 0 : 1;
}

void
ax_bench_writes_put(ax_bench *b, const char *prefix, const ax_bench_writes *w0,
                    const ax_bench_writes *w1, double n)
{
	static const char *const keys[] = {
		"wal_bytes",  "ti_versions",  "attempt_versions",
		"event_rows", "run_versions", "nonhot_updates",
	};
	double d[] = { w1->wal - w0->wal,   w1->ti - w0->ti,
		       w1->att - w0->att,   w1->ev - w0->ev,
		       w1->runs - w0->runs, w1->nonhot - w0->nonhot };
	char   key[64];

	if (n <= 0)
		return;
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		snprintf(key, sizeof(key), "%s%s%s_per_instance", prefix,
		         *prefix != '\0' ? "_" : "", keys[k]);
		ax_bench_put(&b->r, key, d[k] / n);
	}
	ax_bench_say(&b->r,
	             "writes per instance: %.0f WAL bytes; row versions: "
	             "task_instances %.2f, attempts %.2f, event_log %.2f, "
	             "dag_runs %.3f; %.2f updates not HOT",
	             d[0] / n, d[1] / n, d[2] / n, d[3] / n, d[4] / n,
	             d[5] / n);
}

double
ax_bench_secs_since(int64_t t0)
{
	return (double) (ax_clock_mono_us() - t0) / 1e6;
}

/*
 * The rows of the history's runs, table by table, in SQL: written where a
 * running installation keeps finished runs a day old, the month
 * partitions of the instance history (migration 0022), with ids from the
 * hot tables' sequences as a move keeps them.
 */
static const struct {
	const char *what, *sql;
} history_rows[] = {
	{ "instances",
	  "INSERT INTO task_instances_history (id, dag_run_id, dag_id, task, "
	  "logical_time, shard, shard_total, state, try_number, "
	  "created_at, updated_at, ready_at, started_at, ended_at) "
	  "SELECT nextval(pg_get_serial_sequence('task_instances', 'id')), "
	  "r.id, r.dag_id, 't', r.logical_date, s, 10, "
	  "CASE WHEN r.state = 'FAILED' AND s = 0 THEN 'FAILED' ELSE "
	  "'SUCCESS' END, 1, r.created_at, r.ended_at, r.started_at, "
	  "r.started_at, r.ended_at "
	  "FROM dag_runs r CROSS JOIN generate_series(0, 9) s "
	  "ORDER BY r.id, s" },
	{ "attempts",
	  "INSERT INTO attempts_history (id, run_id, instance_id, number, "
	  "state, worker_id, due_at, admitted_at, dispatched_at, "
	  "started_at, ended_at, exit_status, created_at, logical_time) "
	  "SELECT nextval(pg_get_serial_sequence('attempts', 'id')), "
	  "gen_random_uuid(), i.id, 1, i.state, 'bench', "
	  "i.created_at, i.created_at, i.started_at, i.started_at, "
	  "i.ended_at, CASE WHEN i.state = 'FAILED' THEN 1 ELSE 0 "
	  "END, i.created_at, i.logical_time FROM task_instances_history i "
	  "ORDER BY i.id" },
	{ "events",
	  "INSERT INTO event_log (event_id, type, time, dag_id, "
	  "dag_run_id, instance_id, attempt, payload) "
	  "SELECT gen_random_uuid(), CASE WHEN i.state = 'FAILED' "
	  "THEN 'instance.failed' ELSE 'instance.succeeded' END, "
	  "i.ended_at, i.dag_id, i.dag_run_id, i.id, 1, '{}' "
	  "FROM task_instances_history i" },
};

int
ax_bench_build_history(ax_bench *b, long instances, int ndags, int per_day)
{
	char    q[4096], q2[1024], at[96];
	long    runs = instances / 10, days_per = (long) ndags * per_day;
	int64_t t0 = ax_clock_mono_us(), t1;

	/* event_log refuses TRUNCATE (append-only): a re-run on the same
	 * --home empties it with the triggers off for this session */
	if (ax_bench_sql(b, "SET session_replication_role = replica") == 0) {
		(void) ax_bench_sql(b, "TRUNCATE event_log");
		(void) ax_bench_sql(b, "RESET session_replication_role");
	}
	if (ax_bench_sql(b, "SET synchronous_commit = off"))
		return 1;
	if (runs == 0)
		return 0;
	fprintf(stderr,
	        "history: generating %ld runs, %ld instances, attempts and "
	        "events...\n",
	        runs, runs * 10);
	/* the second of its day a run falls on */
	if (per_day <= 1)
		snprintf(at, sizeof(at), "(k %% 86400)");
	else
		snprintf(at, sizeof(at), "((k / %d) %% %d) * %d", ndags,
		         per_day, 86400 / per_day);
	snprintf(
	    q, sizeof(q),
	    "INSERT INTO dag_runs (dag_id, dag_version_id, run_type, "
	    "logical_date, interval_start, interval_end, state, created_at, "
	    "started_at, ended_at, due_at, history_at) "
	    "SELECT d.id, d.active_version_id, 'scheduled', t.ts, t.ts, "
	    "t.ts + interval '1 day', CASE WHEN k %% 100 = 7 THEN 'FAILED' "
	    "ELSE 'SUCCESS' END, t.ts + interval '1 day', "
	    "t.ts + interval '1 day', t.ts + interval '1 day 1 min', "
	    "t.ts + interval '1 day', t.ts + interval '2 days' "
	    "FROM generate_series(0, %ld) k "
	    "JOIN (SELECT id, active_version_id, row_number() OVER (ORDER BY "
	    "id) - 1 AS rn FROM dags WHERE name <> 'bench.scale.probe') d "
	    "ON d.rn = k %% %d "
	    "CROSS JOIN LATERAL (SELECT date_trunc('day', now()) - "
	    "(k / %ld + 2) * interval '1 day' + %s * interval "
	    "'1 s' AS ts) t",
	    runs - 1, ndags, days_per, at);
	/* the months the events and instances fall in get their partitions
	 * first, as a database that has been running through them has (else
	 * the rows would all land in the default partitions) */
	snprintf(
	    q2, sizeof(q2),
	    "SELECT count(*) FILTER (WHERE ax_part_create(t, m::date)) FROM "
	    "unnest(ARRAY['event_log', 'task_instances_history', "
	    "'attempts_history']) t, generate_series(date_trunc('month', "
	    "(date_trunc('day', now()) - %ld * interval '1 day') AT TIME "
	    "ZONE 'UTC'), now() AT TIME ZONE 'UTC', interval '1 month') m",
	    (runs - 1) / days_per + 3);
	if (ax_bench_sql(b, q2) || ax_bench_sql(b, q))
		return 1;
	fprintf(stderr, "history: runs in %.1f s\n", ax_bench_secs_since(t0));
	for (size_t k = 0; k < sizeof(history_rows) / sizeof(history_rows[0]);
	     k++) {
		t1 = ax_clock_mono_us();
		if (ax_bench_sql(b, history_rows[k].sql))
			return 1;
		fprintf(stderr, "history: %s in %.1f s\n",
		        history_rows[k].what, ax_bench_secs_since(t1));
	}
	if (ax_bench_sql(b, "ANALYZE"))
		return 1;
	fprintf(stderr, "history: built in %.1f s\n", ax_bench_secs_since(t0));
	ax_bench_put(&b->r, "history_build_s", ax_bench_secs_since(t0));
	return 0;
}
