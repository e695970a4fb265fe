/*
 * test_ha.c - suite `ha`: AX on a real highly available PostgreSQL
 * (tests/ha/ha_cluster.h: etcd + two Patroni nodes) through a multi-host
 * DSN with target_session_attrs=read-write, while a drill moves the
 * primary.
 *
 * Each test starts the cluster, axd, two ax-worker processes and ax-api
 * on the multi-host DSN, runs an every-second DAG (catchup on) and one
 * run triggered through the API every second, moves the primary mid-run
 * (a planned `patronictl switchover`, or kill -9 of the primary's
 * Patroni and PostgreSQL), and checks from the marks the tasks append to
 * a file themselves, not from the database alone:
 *  - every second of the schedule from the first run to the cut ran once:
 *    no gap over the failover and no repeat;
 *  - every trigger the API accepted (a client retries one that failed
 *    with the same logical date, as an operator's would) ran once;
 *  - no run or instance is left non-terminal, and every AX process still
 *    runs: axd followed the new primary without a restart.
 * It prints the counts, the time from the fault to the first task
 * started after it, and the longest pause in task starts. The AX home
 * (logs, marks) lives in the cluster's directory and goes with it;
 * AX_HA_KEEP=1 moves it to /tmp/ax-ha-kept-PID first, for a post-mortem.
 *
 * Workload: about 80-100 s per test on a loaded 2-core machine (cluster
 * start 15-25 s, 35-45 s of scheduling, settling, teardown). A plain
 * `meson test` leaves the suite out; .ci/run and tests/run.sh --suite ha
 * run it.
 */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <errno.h>
#include <libpq-fe.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api_token.h"
#include "clock.h"
#include "cmd_dag.h"
#include "ha_cluster.h"
#include "log.h"
#include "stack.h"
#include "store.h"

#define TRIG_BASE    1767225600 /* 2026-01-01T00:00:00Z: logical dates */
#define MAX_TRIGGERS 256
#define MAX_MARKS    8192
#define WARM_S       8  /* scheduling before the fault */
#define AFTER_S      25 /* scheduling from the fault to the cut */

static ax_ha_cluster *ha;
static ax_stack       st;
static int            stack_up;
static PGconn        *db; /* the test's own connection (multi-host) */
static char           home[64], marks[96];
static char           api_url[64], auth[AX_API_TOKEN_LEN + 32];

/* ---- the test's view of the database -------------------------------- */

/* The first value of sql as an integer; -2 when the database does not
 * answer now (the connection is re-opened on the next call). */
static int64_t
query(const char *sql)
{
	int64_t   v = -1;
	PGresult *r;

	if (db == NULL || PQstatus(db) != CONNECTION_OK) {
		PQfinish(db);
		db = PQconnectdb(ax_ha_dsn(ha));
		if (PQstatus(db) != CONNECTION_OK)
			return -2;
	}
	r = PQexec(db, sql);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		PQclear(r);
		return -2;
	}
	if (PQntuples(r) > 0 && !PQgetisnull(r, 0, 0)) {
		const char *s = PQgetvalue(r, 0, 0);
		v = s[0] == 't' ? 1 : s[0] == 'f' ? 0 : strtoll(s, NULL, 10);
	}
	PQclear(r);
	return v;
}

static int64_t try_int(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static int64_t
try_int(const char *fmt, ...)
{
	char    sql[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(sql, sizeof(sql), fmt, ap);
	va_end(ap);
	return query(sql);
}

/* try_int that must get an answer within 30 s (the failover is over
 * when it is called). */
static int64_t db_int(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static int64_t
db_int(const char *fmt, ...)
{
	char    sql[4096];
	va_list ap;
	int64_t v, deadline = ax_clock_mono_us() + 30 * AX_USEC_PER_SEC;

	va_start(ap, fmt);
	vsnprintf(sql, sizeof(sql), fmt, ap);
	va_end(ap);
	while ((v = query(sql)) == -2 && ax_clock_mono_us() < deadline)
		ax_clock_sleep_us(200 * AX_USEC_PER_MSEC);
	cr_assert_neq(v, -2, "the database does not answer: %s\n%s",
	              PQerrorMessage(db), sql);
	return v;
}

static void
dump(void)
{
	char path[PATH_MAX + 64], tail[8192];
	snprintf(path, sizeof(path), "%s/axd.log", st.log_dir);
	fprintf(stderr, "---- end of %s ----\n%s", path,
	        ax_proc_log_tail(path, 60, tail, sizeof(tail)));
	for (int i = 0; i < st.n_workers; i++) {
		snprintf(path, sizeof(path), "%s/worker-%d.log", st.log_dir,
		         i + 1);
		fprintf(stderr, "---- end of %s ----\n%s", path,
		        ax_proc_log_tail(path, 15, tail, sizeof(tail)));
	}
	snprintf(path, sizeof(path), "%s/ax-api.log", st.log_dir);
	fprintf(stderr, "---- end of %s ----\n%s", path,
	        ax_proc_log_tail(path, 15, tail, sizeof(tail)));
	ax_ha_dump(ha);
	if (db == NULL || PQstatus(db) != CONNECTION_OK)
		return;
	PGresult *r = PQexec(
	    db,
	    "SELECT r.id, d.name, r.state, r.logical_date, r.due_at, "
	    "(SELECT string_agg(t.state || '/' || coalesce((SELECT "
	    "string_agg(a.number || ':' || a.state, ',') FROM attempts a "
	    "WHERE a.instance_id = t.id), '-'), ' ') FROM task_instances "
	    "t WHERE t.dag_run_id = r.id) FROM dag_runs r JOIN dags d ON "
	    "d.id = r.dag_id WHERE r.state NOT IN ('SUCCESS', 'FAILED', "
	    "'CANCELED') AND r.due_at < now() ORDER BY r.id LIMIT 40");
	fprintf(stderr, "---- unfinished runs due by now ----\n");
	for (int i = 0;
	     PQresultStatus(r) == PGRES_TUPLES_OK && i < PQntuples(r); i++)
		fprintf(stderr, "run %s %s %s logical %s due %s: %s\n",
		        PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
		        PQgetvalue(r, i, 2), PQgetvalue(r, i, 3),
		        PQgetvalue(r, i, 4), PQgetvalue(r, i, 5));
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		fprintf(stderr, "%s", PQerrorMessage(db));
	PQclear(r);
}

/* Fails the test when an AX process has exited (none may, whatever the
 * database does). */
static void
check_alive(const char *when)
{
	ax_proc *dead = ax_stack_check(&st);
	if (dead != NULL) {
		char how[96];
		dump();
		cr_assert_fail("%s: %s %s; AX must ride out a failover of "
		               "its database without a restart",
		               when, dead->name,
		               ax_proc_describe(dead, how, sizeof(how)));
	}
}

/* ---- marks: what the tasks themselves recorded ----------------------- */

typedef struct mark {
	char   dag;   /* 't' tick, 'r' trigger */
	long   when;  /* logical date, epoch seconds */
	double start; /* wall clock when the task started */
} mark;

static int
read_marks(mark *out, int cap)
{
	char  line[256], kind[16], run[64];
	int   n = 0;
	FILE *f = fopen(marks, "re");
	if (f == NULL)
		return 0;
	while (n < cap && fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "%15s %ld %63s %lf", kind, &out[n].when, run,
		           &out[n].start) == 4) {
			out[n].dag = kind[1] == 'i' ? 't' : 'r';
			n++;
		}
	fclose(f);
	return n;
}

/* Times dag ran logical date when, per the marks. */
static int
ran(const mark *m, int n, char dag, long when)
{
	int k = 0;
	for (int i = 0; i < n; i++)
		k += m[i].dag == dag && m[i].when == when;
	return k;
}

static long
first_tick(const mark *m, int n)
{
	long first = 0;
	for (int i = 0; i < n; i++)
		if (m[i].dag == 't' && (first == 0 || m[i].when < first))
			first = m[i].when;
	return first;
}

/* ---- the AX installation --------------------------------------------- */

static size_t
sink(char *p, size_t size, size_t n, void *user)
{
	(void) p;
	(void) user;
	return size * n;
}

/* POST /api/v1/dags/ha.trig/trigger for logical date TRIG_BASE + k: the
 * HTTP status, 0 when ax-api does not answer. */
static long
trigger(int k)
{
	char               url[128], body[96], date[32];
	time_t             t = TRIG_BASE + k;
	struct tm          tm;
	long               code = 0;
	struct curl_slist *h    = NULL;
	CURL              *c    = curl_easy_init();

	cr_assert_not_null(c);
	gmtime_r(&t, &tm);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(url, sizeof(url), "%s/api/v1/dags/ha.trig/trigger", api_url);
	snprintf(body, sizeof(body), "{\"logical_date\":\"%s\"}", date);
	h = curl_slist_append(h, auth);
	h = curl_slist_append(h, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return code;
}

static void
write_dag(const char *dir, const char *file, const char *yaml)
{
	char  path[PATH_MAX + 64];
	FILE *f;
	snprintf(path, sizeof(path), "%s/%s.yaml", dir, file);
	cr_assert_not_null(f = fopen(path, "w"), "%s", path);
	fputs(yaml, f);
	fclose(f);
}

/* The DAGs: each task appends "KIND LOGICAL_EPOCH RUN_ID START" to the
 * marks file (one short O_APPEND write: lines never interleave). */
static void
load_dags(void)
{
	char dags[PATH_MAX + 16], yaml[2048];
	snprintf(dags, sizeof(dags), "%s/dags", st.home);
	cr_assert(mkdir(dags, 0755) == 0 || errno == EEXIST);
	snprintf(yaml, sizeof(yaml),
	         "kind: DAG\nname: ha.tick\n"
	         "schedule: {cron: \"* * * * * ?\", timezone: UTC}\n"
	         "catchup: true\n"
	         "concurrency: {max_active_runs: 50, policy: parallel}\n"
	         "tasks:\n  - name: t\n    command: |\n"
	         "      echo \"tick $(date -u -d \"$AX_LOGICAL_DATE\" +%%s) "
	         "$AX_RUN_ID $(date +%%s.%%N)\" >> %s\n",
	         marks);
	write_dag(dags, "tick", yaml);
	snprintf(yaml, sizeof(yaml),
	         "kind: DAG\nname: ha.trig\n"
	         "concurrency: {max_active_runs: 50, policy: parallel}\n"
	         "tasks:\n  - name: t\n    command: |\n"
	         "      echo \"trig $(date -u -d \"$AX_LOGICAL_DATE\" +%%s) "
	         "$AX_RUN_ID $(date +%%s.%%N)\" >> %s\n",
	         marks);
	write_dag(dags, "trig", yaml);
	cr_assert_eq(ax_dag_load_dir(dags, NULL, ax_ha_dsn(ha)), 0,
	             "loading the DAGs failed (see stderr)");
}

/* Cluster, then axd + 2 workers + ax-api on the multi-host DSN. */
static void
start_all(void)
{
	char      token[AX_API_TOKEN_LEN], why[1024] = "";
	ax_store *s;
	int       up;

	ax_log_init(AX_LOG_WARN, 2);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	cr_assert_eq(ax_ha_start(&ha), AX_OK, "%s", ax_err_detail());
	/* inside the cluster's directory: removed with it, and swept with
	 * it when the test dies */
	snprintf(home, sizeof(home), "%s/ax", ax_ha_dir(ha));
	cr_assert_eq(mkdir(home, 0755), 0, "mkdir %s: %s", home,
	             strerror(errno));
	snprintf(marks, sizeof(marks), "%s/marks", home);
	ax_stack_opts o = {
		.home      = home,
		.dsn       = ax_ha_dsn(ha),
		.workers   = 2,
		.api_port  = ax_ha_free_port(),
		.log_level = "debug",
		/* the tasks write their marks into this root-owned home */
		.worker_run_as = "root",
	};
	cr_assert_eq(ax_stack_init(&st, &o), AX_OK, "%s", ax_err_detail());
	stack_up = 1;
	load_dags();
	cr_assert_eq(ax_stack_start_axd(&st, 60 * AX_USEC_PER_SEC), AX_OK,
	             "axd: %s", ax_err_detail());
	cr_assert_eq(ax_stack_start_workers(&st), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_stack_start_api(&st, &up, why, sizeof(why)), AX_OK,
	             "ax-api: %s", ax_err_detail());
	cr_assert(up, "ax-api did not start: %s", why);
	snprintf(api_url, sizeof(api_url), "http://127.0.0.1:%d", o.api_port);
	cr_assert_eq(ax_store_open(ax_ha_dsn(ha), &s), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(
	    ax_api_token_create(s, AX_API_ROLE_ADMIN, "ha", token, NULL),
	    AX_OK, "%s", ax_err_detail());
	ax_store_close(s);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
}

static void
teardown(void)
{
	if (stack_up) {
		ax_stack_stop(&st, 10 * AX_USEC_PER_SEC);
		ax_stack_fini(&st);
		stack_up = 0;
	}
	PQfinish(db);
	db = NULL;
	if (home[0] != '\0' && getenv("AX_HA_KEEP") != NULL) {
		char kept[64];
		snprintf(kept, sizeof(kept), "/tmp/ax-ha-kept-%ld",
		         (long) getpid());
		if (rename(home, kept) == 0)
			fprintf(stderr, "ha: AX_HA_KEEP: AX home kept in %s\n",
			        kept);
	}
	home[0] = '\0';
	ax_ha_stop(ha);
	ha = NULL;
}

TestSuite(ha, .fini = teardown, .timeout = 600);

/* ---- the drill -------------------------------------------------------- */

typedef enum { DRILL_SWITCHOVER, DRILL_KILL } drill;

typedef struct run_state {
	int     next;     /* next trigger number */
	int64_t next_us;  /* when the next trigger is due */
	int     accepted; /* triggers 0..accepted-1 were accepted */
	int     retries;  /* non-2xx answers retried */
} run_state;

/* Sends the trigger that is due, if any: one per second, each retried
 * (same logical date) until ax-api accepts it; 409 means an earlier try
 * already created the run. */
static void
pace_triggers(run_state *rs)
{
	if (ax_clock_mono_us() < rs->next_us || rs->next >= MAX_TRIGGERS)
		return;
	long code = trigger(rs->next);
	if (code == 202 || code == 409) {
		rs->accepted = ++rs->next;
		rs->next_us += AX_USEC_PER_SEC;
	} else {
		rs->retries++;
		rs->next_us = ax_clock_mono_us() + 500 * AX_USEC_PER_MSEC;
	}
}

/* Keeps triggering for secs seconds while checking the processes. */
static void
run_for(run_state *rs, double secs, const char *phase)
{
	int64_t end = ax_clock_mono_us() + (int64_t) (secs * 1e6);
	while (ax_clock_mono_us() < end) {
		pace_triggers(rs);
		check_alive(phase);
		ax_clock_sleep_us(100 * AX_USEC_PER_MSEC);
	}
}

/* Moves the primary; returns the wall clock of the fault (seconds). */
static double
inject(drill d, run_state *rs)
{
	double t_fault = (double) ax_clock_utc_us() / 1e6;
	int    p = ax_ha_primary(ha), np = -1;
	ax_err rv;

	cr_assert_geq(p, 0, "no primary before the drill");
	if (d == DRILL_SWITCHOVER) {
		rv = ax_ha_switchover(ha, &np);
		if (rv != AX_OK)
			dump();
		cr_assert_eq(rv, AX_OK, "switchover: %s", ax_err_detail());
		fprintf(stderr, "ha: switchover %s -> %s\n",
		        ax_ha_node_name(ha, p), ax_ha_node_name(ha, np));
		return t_fault;
	}
	cr_assert_eq(ax_ha_kill_node(ha, p), AX_OK);
	/* the survivor promotes itself once the leader key expires */
	int64_t deadline = ax_clock_mono_us() + 60 * AX_USEC_PER_SEC;
	while ((np = ax_ha_primary(ha)) < 0) {
		cr_assert_lt(ax_clock_mono_us(), deadline,
		             "no new primary 60 s after the kill");
		pace_triggers(rs);
		check_alive("during the failover");
		ax_clock_sleep_us(100 * AX_USEC_PER_MSEC);
	}
	fprintf(stderr, "ha: %s killed, %s primary after %.1f s\n",
	        ax_ha_node_name(ha, p), ax_ha_node_name(ha, np),
	        (double) ax_clock_utc_us() / 1e6 - t_fault);
	/* the dead node comes back and rejoins as a replica */
	cr_assert_eq(ax_ha_restart_node(ha, p), AX_OK, "%s", ax_err_detail());
	return t_fault;
}

/* What the marks say of the expected tasks: every tick from the first
 * to cut, every accepted trigger. */
typedef struct tally {
	long first; /* first tick's logical date; 0: none ran */
	int  expected, once, lost, twice;
	char bad[1024]; /* the keys that did not run exactly once */
} tally;

static void
count_one(tally *t, int k, const char *what, long key)
{
	size_t len = strlen(t->bad);
	t->expected++;
	t->once += k == 1;
	t->lost += k == 0;
	t->twice += k > 1;
	if (k != 1 && len < sizeof(t->bad) - 48)
		snprintf(t->bad + len, sizeof(t->bad) - len, " %s@%ld x%d",
		         what, key, k);
}

static void
tally_marks(const mark *m, int n, long cut, int accepted, tally *t)
{
	memset(t, 0, sizeof(*t));
	t->first = first_tick(m, n);
	for (long s = t->first; t->first > 0 && s <= cut; s++)
		count_one(t, ran(m, n, 't', s), "tick", s);
	for (int k = 0; k < accepted; k++)
		count_one(t, ran(m, n, 'r', TRIG_BASE + k), "trigger", k);
}

/* Waits until the marks hold every tick up to cut and every accepted
 * trigger, and the database holds no unfinished run due by then. */
static void
settle(const run_state *rs, long cut)
{
	static mark m[MAX_MARKS];
	int64_t     deadline = ax_clock_mono_us() + 60 * AX_USEC_PER_SEC;
	tally       t;

	for (;;) {
		check_alive("settling");
		tally_marks(m, read_marks(m, MAX_MARKS), cut, rs->accepted,
		            &t);
		if (t.first > 0 && t.lost == 0 &&
		    try_int("SELECT count(*) FROM dag_runs WHERE state NOT IN "
		            "('SUCCESS', 'FAILED', 'CANCELED') AND due_at <= "
		            "to_timestamp(%ld)",
		            cut + 1) == 0)
			return;
		if (ax_clock_mono_us() > deadline) {
			dump();
			cr_assert_fail("not settled 60 s after the cut: %d of "
			               "%d expected tasks have no mark:%s",
			               t.lost, t.expected, t.bad);
		}
		ax_clock_sleep_us(500 * AX_USEC_PER_MSEC);
	}
}

/* The checks and the report. */
static void
verify(drill d, const run_state *rs, double t_fault, long cut)
{
	static mark m[MAX_MARKS];
	int         n        = read_marks(m, MAX_MARKS);
	double      recovery = -1, pause = 0, prev = t_fault;
	tally       t;

	tally_marks(m, n, cut, rs->accepted, &t);
	/* task starts after the fault, in order: the first one and the
	 * longest pause between two (the outage as the workload saw it) */
	for (;;) {
		double next = 0;
		for (int i = 0; i < n; i++)
			if (m[i].start > prev &&
			    (next == 0 || m[i].start < next))
				next = m[i].start;
		if (next == 0)
			break;
		if (recovery < 0)
			recovery = next - t_fault;
		if (next - prev > pause)
			pause = next - prev;
		prev = next;
	}
	int64_t stuck  = db_int("SELECT (SELECT count(*) FROM dag_runs WHERE "
	                         "state NOT IN ('SUCCESS', 'FAILED', "
	                         "'CANCELED') AND due_at <= to_timestamp(%ld)) "
	                         "+ (SELECT count(*) FROM task_instances ti "
	                         "JOIN dag_runs r ON r.id = ti.dag_run_id WHERE "
	                         "ti.state NOT IN ('SUCCESS', 'FAILED', "
	                         "'SKIPPED', 'UPSTREAM_FAILED', 'CANCELED') AND "
	                         "r.due_at <= to_timestamp(%ld))",
	                        cut + 1, cut + 1);
	int64_t failed = db_int("SELECT count(*) FROM dag_runs WHERE state "
	                        "<> 'SUCCESS' AND due_at <= to_timestamp(%ld)",
	                        cut + 1);
	fprintf(stderr,
	        "ha %s: expected %d (ticks %ld, triggers %d, %d trigger "
	        "retries), executed once %d, lost %d, executed twice %d, "
	        "stuck %lld, failed runs %lld; fault -> first task start "
	        "%.2f s, longest pause in task starts %.2f s\n",
	        d == DRILL_SWITCHOVER ? "switchover" : "kill -9 primary",
	        t.expected, cut - t.first + 1, rs->accepted, rs->retries,
	        t.once, t.lost, t.twice, (long long) stuck, (long long) failed,
	        recovery, pause);
	cr_assert_gt(cut - t.first, WARM_S, "too few ticks ran");
	cr_assert_geq(rs->accepted, AFTER_S / 2, "too few triggers accepted");
	cr_assert_eq(t.lost + t.twice, 0, "lost %d, executed twice %d:%s",
	             t.lost, t.twice, t.bad);
	cr_assert_eq(stuck, 0, "runs or instances left non-terminal");
	cr_assert_eq(failed, 0, "runs that did not succeed");
}

static void
drill_run(drill d)
{
	run_state rs = { 0 };
	double    t_fault;
	long      cut;

	start_all();
	/* the first tick shows the pipeline runs end to end */
	int64_t deadline = ax_clock_mono_us() + 60 * AX_USEC_PER_SEC;
	for (mark m[4]; read_marks(m, 4) == 0;) {
		check_alive("start-up");
		cr_assert_lt(ax_clock_mono_us(), deadline, "no task ran");
		ax_clock_sleep_us(200 * AX_USEC_PER_MSEC);
	}
	rs.next_us = ax_clock_mono_us();
	run_for(&rs, WARM_S, "before the fault");
	t_fault = inject(d, &rs);
	run_for(&rs, AFTER_S - ((double) ax_clock_utc_us() / 1e6 - t_fault),
	        "after the fault");
	if (d == DRILL_SWITCHOVER) {
		/* and back: the old primary serves again as a primary */
		cr_assert_eq(ax_ha_wait(ha, 1, 60 * AX_USEC_PER_SEC, NULL),
		             AX_OK, "%s", ax_err_detail());
		(void) inject(d, &rs);
		run_for(&rs, 8, "after the second switchover");
	} else {
		cr_assert_eq(ax_ha_wait(ha, 1, 90 * AX_USEC_PER_SEC, NULL),
		             AX_OK, "the killed node did not rejoin: %s",
		             ax_err_detail());
	}
	cut = (long) ((double) ax_clock_utc_us() / 1e6) - 2;
	settle(&rs, cut);
	verify(d, &rs, t_fault, cut);
	check_alive("at the end");
}

Test(ha, switchover)
{
	drill_run(DRILL_SWITCHOVER);
}

Test(ha, failover_kill9)
{
	drill_run(DRILL_KILL);
}
