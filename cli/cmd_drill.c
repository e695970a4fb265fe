/*
 * cmd_drill.c - `axctl drill NAME [--home DIR] [--json] [--repeat N]
 * [--seconds N]`: fault drills on a standalone home (DESIGN.md section 6:
 * "no loss, no duplicate", proven by drills).
 *
 * Role: brings up the embedded PostgreSQL of a home (a temp dir unless
 * --home), then per repetition: empties the DAG tables, loads two DAGs,
 * starts axd, two workers and ax-api (cli/stack.h), runs the workload,
 * injects the drill's fault, waits (bounded) for the system to settle,
 * and counts. The daemons are supervised the way `axctl standalone` does
 * (ax_stack_supervise): a daemon the fault killed is started again after
 * the same backoff, so the drill measures what a standalone user gets.
 *
 * Workload:
 * - drill.tick: cron `* * * * * ?` with catchup and a window of W seconds
 *   that opens a few seconds after the load: exactly W runs of one task
 *   (of K parallel tasks t, t1 .. tK-1 for kill-worker-holding, whose K
 *   tasks fall due together on workers of fewer slots);
 * - drill.burst: tasks a, b, c (b and c after a), triggered through the
 *   API with explicit logical dates 2020-01-01T00:00:00Z + seq seconds,
 *   one trigger every 300 ms around the fault (every 100 ms for
 *   kill-scheduler, only while axd is down for commands-while-down).
 *   A trigger the API refuses is retried for 10 s, then counted as
 *   refused (not expected); a 409 (the run exists) counts as accepted.
 * Every task runs HOME/drill-task.sh, which appends a start and an end
 * mark (drill_report.h) to HOME/marks around a short sleep. Tasks retry
 * 3 times after 1 s, so an attempt lost with its worker is run again.
 *
 * Settled: the tick window has passed, every trigger was sent, every
 * expected run exists, no run or instance of the drill DAGs is
 * non-terminal and the marks file did not grow for 2 s; or nothing
 * changed for 15 s; or the bound passed (about 60 s per drill, plus
 * --seconds for stop-db). Then the tally (drill_report.h) compares the
 * expected keys, the marks and the instances, hot and in history
 * (task_instances_all).
 *
 * Threads: the triggers go out from a thread of their own (an API call
 * may block while PostgreSQL is down); everything else, children
 * included, belongs to the main thread.
 *
 * Progress goes to stderr; stdout holds the report only (one JSON object
 * with --json).
 */
#include "cmd_drill.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api_client.h"
#include "clock.h"
#include "cmd_db.h"
#include "drill_report.h"
#include "log.h"
#include "stack.h"

#define MAX_TRIGGERS   256
#define TRIGGER_BASE_S 1577836800 /* 2020-01-01T00:00:00Z */
#define TICK_LEAD_S    4          /* the tick window opens this late */
#define FAULT_AFTER_US (3 * AX_USEC_PER_SEC)  /* stack up -> fault */
#define BOUND_US       (60 * AX_USEC_PER_SEC) /* per drill, stack up on */
#define QUIET_US       (15 * AX_USEC_PER_SEC)
#define GRACE_US       (10 * AX_USEC_PER_SEC)
#define STOP_PAST_US   (5 * AX_USEC_PER_SEC) /* stop-worker: lease + this */
#define MAX_TICK_TASKS 16

typedef struct drill drill;

/* One drill: its fault and the shape of its workload. */
typedef struct drill_kind {
	const char *name;
	const char *what;
	int (*inject)(drill *d); /* 0, or 1 after a message */
	int tick_s;              /* W: seconds of the tick window */
	int trigger_gap_ms;      /* 0: the inject function triggers */
	int standby;             /* 1: start a second axd */
	int tick_tasks;          /* parallel tasks of drill.tick; 0: 1 */
	int slots;               /* worker.slots; 0: the default */
} drill_kind;

typedef struct drill_opts {
	const char *name;
	const char *home;
	int         json;
	int         repeat;
	int         seconds; /* stop-db */
} drill_opts;

/* The triggers of one repetition: planned by the main thread, sent by
 * the trigger thread (or by inject), read by the main thread after. */
typedef struct triggers {
	ax_api_client *api;
	int            n;                /* planned */
	int64_t        at[MAX_TRIGGERS]; /* monotonic send time */
	int            ok[MAX_TRIGGERS]; /* 1 accepted, -1 refused */
	atomic_int     sent;             /* how many are decided */
	atomic_int     stop;             /* main -> thread: give up */
} triggers;

struct drill {
	drill_opts        o;
	const drill_kind *k;
	ax_stack_home     h; /* h.home, h.w (the embedded cluster) */
	char              marks[PATH_MAX + 16];
	char              dagdir[PATH_MAX + 16];
	char              api_url[64];
	char              token[PATH_MAX + 16];
	PGconn           *db;
	ax_stack          st;
	int               stack_up;
	int64_t           tick_start_s; /* first logical second */
	int64_t           fault_us;     /* UTC; 0 until injected */
	int64_t           bound_mono;   /* settle deadline */
	triggers          tr;
};

static volatile sig_atomic_t g_stop;

static void
on_stop(int sig)
{
	g_stop = sig;
}

static int
fail(const char *what, ax_err rv)
{
	const char *d = ax_err_detail();
	fprintf(stderr, "axctl drill: %s: %s\n", what,
	        d[0] != '\0' ? d : ax_strerror(rv));
	return 1;
}

static void say(const drill *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
say(const drill *d, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "drill %s: ", d->k->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ---- database ---------------------------------------------------------
 */

/* Runs sql; on failure prints it and returns 1. Reconnects first when the
 * connection broke (PostgreSQL restarted by a drill). */
static PGresult *
query(drill *d, const char *sql)
{
	PGresult *r;

	if (PQstatus(d->db) != CONNECTION_OK)
		PQreset(d->db);
	r = PQexec(d->db, sql);
	if (PQresultStatus(r) != PGRES_TUPLES_OK &&
	    PQresultStatus(r) != PGRES_COMMAND_OK) {
		PQclear(r);
		return NULL;
	}
	return r;
}

/* The integer a one-value query answers; -1 on any failure. */
static int64_t
query_int(drill *d, const char *sql)
{
	PGresult *r = query(d, sql);
	int64_t   v = -1;
	if (r != NULL && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
		v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return v;
}

/* ---- the workload -----------------------------------------------------
 */

static int
write_text(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");
	if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0) {
		fprintf(stderr, "axctl drill: cannot write %s: %s\n", path,
		        strerror(errno));
		return 1;
	}
	chmod(path, mode);
	return 0;
}

static void
iso(int64_t utc_us, char *buf, size_t len)
{
	time_t    t = (time_t) (utc_us / AX_USEC_PER_SEC);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + strlen(buf), len - strlen(buf), ".%03dZ",
	         (int) (utc_us % AX_USEC_PER_SEC / 1000));
}

/* The name of task i of drill.tick: t, then t1, t2, ... */
static void
tick_task(int i, char *buf, size_t len)
{
	if (i == 0)
		snprintf(buf, len, "t");
	else
		snprintf(buf, len, "t%d", i);
}

/* How many tasks drill.tick has (1..MAX_TICK_TASKS). */
static int
tick_tasks(const drill *d)
{
	int n = d->k->tick_tasks > 0 ? d->k->tick_tasks : 1;
	return n < MAX_TICK_TASKS ? n : MAX_TICK_TASKS;
}

/*
 * Writes HOME/drill-task.sh and the two DAGs, the tick window opening
 * TICK_LEAD_S from now, and loads them.
 */
static int
write_workload(drill *d)
{
	char    script[PATH_MAX + 32], path[PATH_MAX + 64], from[40], to[40];
	char    tasks[MAX_TICK_TASKS * (PATH_MAX + 64)];
	char    text[sizeof(tasks) + 4 * PATH_MAX + 1024];
	size_t  nt  = 0;
	int64_t now = ax_clock_utc_us();

	d->tick_start_s = now / AX_USEC_PER_SEC + TICK_LEAD_S;
	iso(d->tick_start_s * AX_USEC_PER_SEC, from, sizeof(from));
	/* half a second before the next period: logical dates start ..
	 * start + W - 1 whether the end bound is inclusive or not */
	iso((d->tick_start_s + d->k->tick_s) * AX_USEC_PER_SEC -
	        AX_USEC_PER_SEC / 2,
	    to, sizeof(to));
	snprintf(script, sizeof(script), "%s/drill-task.sh", d->h.home);
	snprintf(
	    text, sizeof(text),
	    "#!/bin/sh\n"
	    "# A task of `axctl drill`: one start and one end mark, each\n"
	    "# a single O_APPEND write, around a sleep of $1 seconds.\n"
	    "k=\"$AX_DAG/$AX_TASK/$(date -u -d \"$AX_LOGICAL_DATE\" "
	    "+%%s)/${AX_SHARD_INDEX:-0}\"\n"
	    "echo \"start $k $AX_RUN_ID $AX_ATTEMPT $(date +%%s%%6N)\" "
	    ">> '%s'\n"
	    "sleep \"$1\"\n"
	    "echo \"end $k $AX_RUN_ID $AX_ATTEMPT $(date +%%s%%6N)\" "
	    ">> '%s'\n",
	    d->marks, d->marks);
	if (write_text(script, text, 0755))
		return 1;
	tasks[0] = '\0';
	for (int i = 0; i < tick_tasks(d); i++) {
		char name[16];
		tick_task(i, name, sizeof(name));
		nt += (size_t) snprintf(
		    tasks + nt, sizeof(tasks) - nt,
		    "  - {name: %s, command: \"'%s' 0.2\"}\n", name, script);
	}
	snprintf(path, sizeof(path), "%s/tick.yaml", d->dagdir);
	snprintf(text, sizeof(text),
	         "kind: DAG\nname: drill.tick\n"
	         "schedule: {cron: \"* * * * * ?\", timezone: UTC}\n"
	         "start: \"%s\"\nend: \"%s\"\ncatchup: true\n"
	         "concurrency: {max_active_runs: 64, policy: parallel}\n"
	         "defaults: {retries: {count: 3, delay: 1s}}\n"
	         "tasks:\n%s",
	         from, to, tasks);
	if (write_text(path, text, 0644))
		return 1;
	snprintf(path, sizeof(path), "%s/burst.yaml", d->dagdir);
	snprintf(text, sizeof(text),
	         "kind: DAG\nname: drill.burst\n"
	         "concurrency: {max_active_runs: 256, policy: parallel}\n"
	         "defaults: {retries: {count: 3, delay: 1s}}\n"
	         "tasks:\n"
	         "  - {name: a, command: \"'%s' 0.5\"}\n"
	         "  - {name: b, command: \"'%s' 0.5\", depends_on: [a]}\n"
	         "  - {name: c, command: \"'%s' 0.5\", depends_on: [a]}\n",
	         script, script, script);
	if (write_text(path, text, 0644))
		return 1;
	if (ax_stack_load_dags(d->dagdir, d->h.w.dsn) != 0) {
		fprintf(stderr, "axctl drill: loading %s failed\n", d->dagdir);
		return 1;
	}
	return 0;
}

/* ---- triggers -----------------------------------------------------------
 */

/* Sends trigger seq until accepted, refused for good or told to stop. */
static void
send_trigger(triggers *tr, int seq)
{
	char    path[128], date[40];
	int64_t give_up = ax_clock_mono_us() + 10 * AX_USEC_PER_SEC;
	json_t *body, *out = NULL;

	iso((int64_t) (TRIGGER_BASE_S + seq) * AX_USEC_PER_SEC, date,
	    sizeof(date));
	body = json_pack("{s:s}", "logical_date", date);
	snprintf(path, sizeof(path), "/api/v1/dags/drill.burst/trigger");
	tr->ok[seq] = -1;
	while (!atomic_load(&tr->stop) && body != NULL) {
		ax_err rv = ax_api_client_post(tr->api, path, body, &out);
		json_decref(out);
		out = NULL;
		if (rv == AX_OK || rv == AX_ESTATE) { /* 409: it exists */
			tr->ok[seq] = 1;
			break;
		}
		if (ax_clock_mono_us() > give_up)
			break;
		ax_clock_sleep_us(500 * AX_USEC_PER_MSEC);
	}
	json_decref(body);
	atomic_fetch_add(&tr->sent, 1);
}

static void *
trigger_thread(void *arg)
{
	triggers *tr = arg;

	for (int i = 0; i < tr->n && !atomic_load(&tr->stop); i++) {
		while (ax_clock_mono_us() < tr->at[i] &&
		       !atomic_load(&tr->stop))
			ax_clock_sleep_us(10 * AX_USEC_PER_MSEC);
		send_trigger(tr, i);
	}
	return NULL;
}

/* Plans n triggers from mono time from, gap_ms apart. */
static void
plan_triggers(triggers *tr, int64_t from, int n, int gap_ms)
{
	for (int i = 0; i < n && tr->n < MAX_TRIGGERS; i++)
		tr->at[tr->n++] =
		    from + (int64_t) i * gap_ms * AX_USEC_PER_MSEC;
}

/* ---- supervision and waiting ------------------------------------------
 */

/* Sleeps us while supervising the daemons every 100 ms. Returns 1 when
 * interrupted by SIGINT / SIGTERM. */
static int
drill_sleep(drill *d, int64_t us)
{
	int64_t end = ax_clock_mono_us() + us;
	char    prefix[64];

	snprintf(prefix, sizeof(prefix), "drill %s: ", d->k->name);
	for (;;) {
		int64_t left = end - ax_clock_mono_us();
		ax_stack_supervise(&d->st, stderr, prefix);
		if (g_stop)
			return 1;
		if (left <= 0)
			return 0;
		ax_clock_sleep_us(left < 100 * AX_USEC_PER_MSEC
		                      ? left
		                      : 100 * AX_USEC_PER_MSEC);
	}
}

static void
mark_fault(drill *d, const char *what)
{
	d->fault_us = ax_clock_utc_us();
	say(d, "fault: %s", what);
}

/* The worker (index) running an attempt of a drill DAG; -1 when none
 * shows within 10 s. */
static int
busy_worker(drill *d)
{
	int64_t deadline = ax_clock_mono_us() + 10 * AX_USEC_PER_SEC;

	while (ax_clock_mono_us() < deadline) {
		int64_t n = query_int(
		    d,
		    "SELECT substr(worker_id, 12)::int FROM attempts "
		    "WHERE state = 'RUNNING' AND worker_id LIKE "
		    "'standalone-%' ORDER BY started_at LIMIT 1");
		if (n >= 1 && n <= d->st.n_workers)
			return (int) n - 1;
		if (drill_sleep(d, 100 * AX_USEC_PER_MSEC))
			return -1;
	}
	return -1;
}

/* ---- the faults ---------------------------------------------------------
 */

static int
inject_kill_worker(drill *d)
{
	int i = busy_worker(d);
	if (i < 0) {
		say(d, "no worker ran a task within 10 s");
		return 1;
	}
	mark_fault(d, "kill -9 of a worker running a task");
	kill(d->st.workers[i].pid, SIGKILL);
	return 0;
}

/*
 * kill -9 of a worker while it holds dispatches beyond its slots: more
 * of drill.tick's tasks fall due at one instant than the workers have
 * slots, so each worker is sent some ahead of a free slot (prefetch,
 * worker.prefetch) that it holds unstarted until one frees. Those die
 * with the worker unstarted, and must still run once each.
 */
static int
inject_kill_worker_holding(drill *d)
{
	char    sql[512];
	int64_t deadline = ax_clock_mono_us() + 10 * AX_USEC_PER_SEC;
	int64_t w = -1, held = 0;

	snprintf(sql, sizeof(sql),
	         "SELECT substr(worker_id, 12)::int * 1000 + count(*) FROM "
	         "attempts WHERE state IN ('DISPATCHED', 'RUNNING') AND "
	         "worker_id LIKE 'standalone-%%' GROUP BY worker_id HAVING "
	         "count(*) > %d ORDER BY count(*) DESC LIMIT 1",
	         d->k->slots);
	while (ax_clock_mono_us() < deadline) {
		int64_t v = query_int(d, sql);
		if (v >= 1000 && v / 1000 <= d->st.n_workers) {
			w    = v / 1000 - 1;
			held = v % 1000 - d->k->slots;
			break;
		}
		if (drill_sleep(d, 10 * AX_USEC_PER_MSEC))
			return 1;
	}
	if (w < 0) {
		say(d,
		    "no worker held dispatches beyond its %d slots within "
		    "10 s",
		    d->k->slots);
		return 1;
	}
	/* the row is written before the dispatch is sent: let it arrive */
	ax_clock_sleep_us(20 * AX_USEC_PER_MSEC);
	mark_fault(d,
	           "kill -9 of a worker holding dispatches beyond its "
	           "slots");
	say(d, "worker %d holds %lld beyond its %d slots", (int) w + 1,
	    (long long) held, d->k->slots);
	kill(d->st.workers[w].pid, SIGKILL);
	return 0;
}

/* Every descendant of pid (its tasks), into out; returns how many. */
static size_t
descendants(pid_t pid, pid_t *out, size_t cap)
{
	size_t n = 0, done = 0;
	out[n++] = pid;
	while (done < n) {
		pid_t parent = out[done++];
		char  path[64], buf[512];
		FILE *f;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/children",
		         (int) parent, (int) parent);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		if (fgets(buf, sizeof(buf), f) != NULL)
			for (char *s = strtok(buf, " \n"); s && n < cap;
			     s       = strtok(NULL, " \n"))
                                out[n++] = (pid_t) atoi(s);
		fclose(f);
	}
	return n;
}

/*
 * SIGSTOP of a worker and its tasks (its host freezes) for the worker
 * lease + 5 s; then SIGCONT to the worker, and 2 s later to its tasks.
 * Meanwhile the scheduler gave the attempts to the other worker. A
 * resumed worker that finds its lease lapsed must kill the tasks it held
 * (SIGKILL ends a stopped process too) before they go on: those that are
 * still alive when they are resumed finish, and count twice. Resuming
 * everything at once would race the worker against the last few
 * milliseconds of each task's sleep, which no fencing can win every time.
 */
static int
inject_stop_worker(drill *d)
{
	pid_t   pids[256];
	size_t  n;
	int64_t lease = 10 * AX_USEC_PER_SEC;
	int     i     = busy_worker(d);

	if (i < 0) {
		say(d, "no worker ran a task within 10 s");
		return 1;
	}
	mark_fault(d, "SIGSTOP of a worker and its tasks past its lease");
	kill(d->st.workers[i].pid, SIGSTOP);
	n = descendants(d->st.workers[i].pid, pids, 256);
	for (size_t j = 1; j < n; j++)
		kill(pids[j], SIGSTOP);
	if (drill_sleep(d, lease + STOP_PAST_US))
		return 1;
	say(d, "SIGCONT to the worker; to its %zu task processes in 2 s",
	    n - 1);
	kill(pids[0], SIGCONT);
	if (drill_sleep(d, 2 * AX_USEC_PER_SEC))
		return 1;
	for (size_t j = 1; j < n; j++)
		kill(pids[j], SIGCONT);
	return 0;
}

static int
inject_kill_scheduler(drill *d)
{
	mark_fault(d, "kill -9 of axd during a burst of triggers");
	kill(d->st.axd.pid, SIGKILL);
	return 0;
}

/* The axd (axd or standby) that holds the scheduler lease. */
static ax_proc *
active_axd(drill *d)
{
	int64_t pid = query_int(
	    d,
	    "SELECT substring(holder FROM ' pid ([0-9]+)$')::int FROM "
	    "scheduler_lease WHERE expires_at > now()");
	if (pid > 0 && pid == d->st.standby.pid)
		return &d->st.standby;
	return &d->st.axd;
}

static int
inject_failover(drill *d)
{
	ax_proc *a = active_axd(d);
	mark_fault(d, "kill -9 of the active axd (a standby waits)");
	say(d, "active: %s (pid %d)", a->name, (int) a->pid);
	kill(a->pid, SIGKILL);
	return 0;
}

static int
inject_restart_db(drill *d)
{
	ax_err rv;
	mark_fault(d, "PostgreSQL restarted");
	if ((rv = ax_pg_embed_down(d->h.w.embed)) != AX_OK ||
	    (rv = ax_pg_embed_up(d->h.w.embed)) != AX_OK)
		return fail("restarting PostgreSQL", rv);
	return 0;
}

/* PostgreSQL killed -9 with every process of it, as in a crash: the
 * commits that did not wait for the WAL flush (run creation, plans,
 * admissions, audit events) may be lost; what was acknowledged to a
 * worker or written by a durable commit after them is not. */
static int
inject_crash_db(drill *d)
{
	ax_err rv;
	mark_fault(d, "PostgreSQL killed (SIGKILL to every process)");
	if ((rv = ax_pg_embed_crash(d->h.w.embed)) != AX_OK ||
	    (rv = ax_pg_embed_up(d->h.w.embed)) != AX_OK)
		return fail("crashing and starting PostgreSQL", rv);
	return 0;
}

static int
inject_stop_db(drill *d)
{
	char   what[64];
	ax_err rv;

	snprintf(what, sizeof(what), "PostgreSQL stopped for %d s",
	         d->o.seconds);
	mark_fault(d, what);
	if ((rv = ax_pg_embed_down(d->h.w.embed)) != AX_OK)
		return fail("stopping PostgreSQL", rv);
	if (drill_sleep(d, (int64_t) d->o.seconds * AX_USEC_PER_SEC))
		return 1;
	say(d, "starting PostgreSQL again");
	if ((rv = ax_pg_embed_up(d->h.w.embed)) != AX_OK)
		return fail("starting PostgreSQL", rv);
	return 0;
}

/* axd stopped cleanly (not restarted: stopping is set), 10 triggers
 * through the API, axd started again. */
static int
inject_commands_while_down(drill *d)
{
	pthread_t th;
	ax_err    rv;

	mark_fault(d, "axd stopped; triggers sent while it is down");
	ax_proc_stop(&d->st.axd, GRACE_US);
	plan_triggers(&d->tr, ax_clock_mono_us(), 10, 100);
	if (pthread_create(&th, NULL, trigger_thread, &d->tr) != 0)
		return fail("trigger thread",
		            ax_err_set(AX_EIO, "%s", strerror(errno)));
	while (atomic_load(&d->tr.sent) < d->tr.n && !g_stop)
		drill_sleep(d, 100 * AX_USEC_PER_MSEC);
	atomic_store(&d->tr.stop, 1);
	pthread_join(th, NULL);
	say(d, "starting axd again");
	if ((rv = ax_stack_start_axd(&d->st, 60 * AX_USEC_PER_SEC)) != AX_OK)
		return fail("axd", rv);
	return 0;
}

static const drill_kind kinds[] = {
	{ "kill-worker", "kill -9 a worker mid-run", inject_kill_worker, 10,
	  300, 0, 0, 0 },
	{ "kill-worker-holding",
	  "kill -9 a worker holding dispatches beyond its slots",
	  inject_kill_worker_holding, 10, 0, 0, 8, 2 },
	{ "stop-worker", "SIGSTOP a worker past its lease, then SIGCONT",
	  inject_stop_worker, 20, 300, 0, 0, 0 },
	{ "kill-scheduler", "kill -9 axd mid-burst", inject_kill_scheduler, 10,
	  100, 0, 0, 0 },
	{ "failover", "two axd; kill -9 the active one", inject_failover, 10,
	  300, 1, 0, 0 },
	{ "restart-db", "restart PostgreSQL mid-run", inject_restart_db, 10,
	  300, 0, 0, 0 },
	{ "crash-db", "kill -9 PostgreSQL mid-run (crash recovery)",
	  inject_crash_db, 10, 300, 0, 0, 0 },
	{ "stop-db", "stop PostgreSQL for --seconds N mid-run", inject_stop_db,
	  10, 300, 0, 0, 0 },
	{ "commands-while-down",
	  "stop axd, send triggers through the API, start axd",
	  inject_commands_while_down, 8, 0, 0, 0, 0 },
	{ NULL, NULL, NULL, 0, 0, 0, 0, 0 },
};

/* ---- one repetition -----------------------------------------------------
 */

/* Waits until ax-api answers /healthz (10 s). */
static int
api_ready(drill *d)
{
	int64_t deadline = ax_clock_mono_us() + 10 * AX_USEC_PER_SEC;
	json_t *out      = NULL;

	while (ax_api_client_get(d->tr.api, "/healthz", &out) != AX_OK) {
		if (ax_clock_mono_us() > deadline || drill_sleep(d, 100000)) {
			fprintf(stderr,
			        "axctl drill: ax-api does not answer "
			        "at %s; see %s\n",
			        d->api_url, d->st.api.log_path);
			return 1;
		}
	}
	json_decref(out);
	return 0;
}

static int
start_stack(drill *d)
{
	ax_stack_opts so = {
		.home      = d->h.home,
		.dsn       = d->h.w.dsn,
		.workers   = 2,
		.api_port  = atoi(strrchr(d->api_url, ':') + 1),
		.log_level = "info",
		/* the drill's own script appends to the marks file of the
		 * drill's home, which belongs to whoever runs the drill (a
		 * worker that is not root ignores this) */
		.worker_run_as = "root",
		.worker_slots  = d->k->slots,
	};
	char   why[1200] = "";
	int    up        = 0;
	ax_err rv;

	if ((rv = ax_stack_init(&d->st, &so)) != AX_OK)
		return fail("home", rv);
	d->stack_up = 1;
	if ((rv = ax_stack_start_axd(&d->st, 60 * AX_USEC_PER_SEC)) != AX_OK)
		return fail("axd", rv);
	if (d->k->standby && (rv = ax_stack_start_standby(&d->st)) != AX_OK)
		return fail("standby axd", rv);
	if ((rv = ax_stack_start_workers(&d->st)) != AX_OK)
		return fail("workers", rv);
	if ((rv = ax_stack_start_api(&d->st, &up, why, sizeof(why))) != AX_OK)
		return fail("ax-api", rv);
	if (!up) {
		fprintf(stderr, "axctl drill: ax-api did not start: %s\n",
		        why);
		return 1;
	}
	if ((rv = ax_stack_admin_token(&d->st, d->token, sizeof(d->token))) !=
	    AX_OK)
		return fail("admin token", rv);
	if (d->tr.api == NULL) {
		ax_api_opts ao = { .server     = d->api_url,
			           .token_file = d->token };
		if ((rv = ax_api_client_new(&ao, &d->tr.api)) != AX_OK)
			return fail("API client", rv);
	}
	return api_ready(d);
}

static void
stop_stack(drill *d)
{
	if (!d->stack_up)
		return;
	ax_stack_stop(&d->st, GRACE_US);
	ax_stack_fini(&d->st);
	d->stack_up = 0;
}

static int
accepted(const drill *d)
{
	int n = 0;
	for (int i = 0; i < d->tr.n; i++)
		n += d->tr.ok[i] == 1;
	return n;
}

/* "runs runs_open instances_open instances_done" of the drill DAGs. */
static int
progress(drill *d, int64_t v[4])
{
	PGresult *r =
	    query(d,
	          "SELECT (SELECT count(*) FROM dag_runs), "
	          "(SELECT count(*) FROM dag_runs WHERE state NOT IN "
	          "('SUCCESS', 'FAILED', 'CANCELED')), "
	          "(SELECT count(*) FILTER (WHERE state NOT IN ('SUCCESS', "
	          "'FAILED', 'TIMEOUT', 'CANCELED', 'SKIPPED')) FROM "
	          "task_instances_all), "
	          "(SELECT count(*) FILTER (WHERE state IN "
	          "('SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELED', 'SKIPPED')) "
	          "FROM task_instances_all)");
	int ok = r != NULL && PQntuples(r) == 1;
	for (int i = 0; ok && i < 4; i++)
		v[i] = strtoll(PQgetvalue(r, 0, i), NULL, 10);
	PQclear(r);
	return ok;
}

static long
file_size(const char *path)
{
	struct stat sb;
	return stat(path, &sb) == 0 ? (long) sb.st_size : 0;
}

/*
 * Waits until the system settled (see the file comment) or the bound
 * passed; supervises meanwhile.
 */
static void
settle(drill *d)
{
	int64_t last[4] = { -1, -1, -1, -1 }, changed = ax_clock_mono_us();
	long    size = -1;

	while (ax_clock_mono_us() < d->bound_mono && !g_stop) {
		int64_t v[4], now = ax_clock_mono_us();
		long    sz  = file_size(d->marks);
		int     got = progress(d, v);
		int     triggers_done =
		    atomic_load(&d->tr.sent) >= d->tr.n || d->tr.n == 0;
		int window_done = ax_clock_utc_us() / AX_USEC_PER_SEC >
		    d->tick_start_s + d->k->tick_s + 1;

		if (sz != size || !got || memcmp(v, last, sizeof(v)) != 0)
			changed = now;
		size = sz;
		if (got)
			memcpy(last, v, sizeof(v));
		if (triggers_done && window_done && got &&
		    v[0] >= d->k->tick_s + accepted(d) && v[1] == 0 &&
		    v[2] == 0 && now - changed >= 2 * AX_USEC_PER_SEC)
			return;
		if (triggers_done && window_done &&
		    now - changed >= QUIET_US) {
			say(d, "nothing changed for %lld s: counting",
			    (long long) (QUIET_US / AX_USEC_PER_SEC));
			return;
		}
		drill_sleep(d, 250 * AX_USEC_PER_MSEC);
	}
	if (!g_stop)
		say(d, "not settled within the bound: counting");
}

/* Reads the marks file; *n marks in a malloc'd array (NULL when none). */
static ax_drill_mark *
read_marks(const drill *d, size_t *n)
{
	FILE          *f = fopen(d->marks, "r");
	char           line[512];
	size_t         cap = 0;
	ax_drill_mark *v   = NULL, m;

	*n = 0;
	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		if (ax_drill_mark_parse(line, &m) != 0)
			continue;
		if (*n == cap) {
			ax_drill_mark *g;
			cap = cap ? cap * 2 : 256;
			if ((g = realloc(v, cap * sizeof(*v))) == NULL)
				break;
			v = g;
		}
		v[(*n)++] = m;
	}
	if (f != NULL)
		fclose(f);
	return v;
}

/* The first column of every row of sql, strdup'd; NULL-free array. */
static char **
column(drill *d, const char *sql, size_t *n)
{
	PGresult *r = query(d, sql);
	char    **v;

	*n = 0;
	if (r == NULL)
		return NULL;
	v = calloc((size_t) PQntuples(r) + 1, sizeof(*v));
	for (int i = 0; v != NULL && i < PQntuples(r); i++)
		v[(*n)++] = strdup(PQgetvalue(r, i, 0));
	PQclear(r);
	return v;
}

static void
free_strs(char **v, size_t n)
{
	for (size_t i = 0; v != NULL && i < n; i++)
		free(v[i]);
	free(v);
}

/* The expected keys: the tick window and the accepted triggers. */
static char **
expected_keys(const drill *d, size_t *n)
{
	size_t cap = (size_t) d->k->tick_s * (size_t) tick_tasks(d) +
	    3 * (size_t) d->tr.n + 1;
	char **v = calloc(cap, sizeof(*v));
	char   key[AX_DRILL_KEY_MAX], task[16];

	*n = 0;
	for (int s = 0; v != NULL && s < d->k->tick_s; s++)
		for (int i = 0; i < tick_tasks(d); i++) {
			tick_task(i, task, sizeof(task));
			snprintf(key, sizeof(key), "drill.tick/%s/%lld/0",
			         task, (long long) (d->tick_start_s + s));
			v[(*n)++] = strdup(key);
		}
	for (int i = 0; v != NULL && i < d->tr.n; i++)
		for (const char *t = "abc"; d->tr.ok[i] == 1 && *t; t++) {
			snprintf(key, sizeof(key), "drill.burst/%c/%lld/0", *t,
			         (long long) TRIGGER_BASE_S + i);
			v[(*n)++] = strdup(key);
		}
	return v;
}

static void
tally(drill *d, ax_drill_tally *t)
{
	size_t         n_exp, n_marks, n_rows = 0, n_ids, n_keys;
	char         **exp   = expected_keys(d, &n_exp);
	ax_drill_mark *marks = read_marks(d, &n_marks);
	ax_drill_row  *rows  = NULL;
	char           sql[256];
	char         **ids, **keys;
	PGresult      *r;

	r = query(d,
	          "SELECT d.name || '/' || t.task || '/' || "
	          "extract(epoch FROM t.logical_time)::bigint || '/' || "
	          "t.shard, t.state FROM task_instances_all t JOIN dags d ON "
	          "d.id = t.dag_id");
	if (r != NULL &&
	    (rows = calloc((size_t) PQntuples(r) + 1, sizeof(*rows))) != NULL)
		for (int i = 0; i < PQntuples(r); i++, n_rows++) {
			snprintf(rows[i].key, sizeof(rows[i].key), "%s",
			         PQgetvalue(r, i, 0));
			snprintf(rows[i].state, sizeof(rows[i].state), "%s",
			         PQgetvalue(r, i, 1));
		}
	PQclear(r);
	if (r == NULL)
		say(d, "cannot read task_instances: %s",
		    PQerrorMessage(d->db));
	ax_drill_tally_count(
	    t, exp, n_exp, marks, n_marks, rows, n_rows,
	    query_int(d,
	              "SELECT count(*) FROM dag_runs WHERE state NOT IN "
	              "('SUCCESS', 'FAILED', 'CANCELED')"));
	t->refused = d->tr.n - accepted(d);
	snprintf(sql, sizeof(sql),
	         "SELECT run_id FROM attempts_all WHERE dispatched_at >= "
	         "ax_ts(%" PRId64 ")",
	         d->fault_us);
	ids = column(d, sql, &n_ids);
	if (d->fault_us > 0)
		t->recovery_s =
		    ax_drill_recovery(marks, n_marks, d->fault_us, ids, n_ids);
	/* keys the database holds twice (hot and history together) would be
	 * a schema defect: shown */
	keys = column(d,
	              "SELECT count(*) - count(DISTINCT (dag_id, task, "
	              "logical_time, shard)) FROM task_instances_all",
	              &n_keys);
	if (n_keys == 1 && strcmp(keys[0], "0") != 0)
		say(d, "%s instance keys stored twice", keys[0]);
	free_strs(keys, n_keys);
	free_strs(ids, n_ids);
	free_strs(exp, n_exp);
	free(marks);
	free(rows);
}

/* Prints the last max (at most 64) warning and error lines of the log
 * at path. */
static void
show_warnings(const char *path, size_t max)
{
	static char ring[64][512];
	char        line[512];
	size_t      n = 0;
	FILE       *f = fopen(path, "r");

	max = max < 64 ? max : 64;
	while (f != NULL && fgets(line, sizeof(line), f) != NULL)
		if (strstr(line, "\"level\":\"warn\"") != NULL ||
		    strstr(line, "\"level\":\"error\"") != NULL)
			snprintf(ring[n++ % max], sizeof(ring[0]), "%s", line);
	if (f != NULL)
		fclose(f);
	fprintf(stderr, "---- warnings and errors of %s (last %zu) ----\n",
	        path, n < max ? n : max);
	for (size_t i = n < max ? 0 : n - max; i < n; i++)
		fputs(ring[i % max], stderr);
}

/*
 * After a repetition that lost, repeated or left work stuck: each
 * daemon's last warnings and errors to stderr, axd last with the end of
 * its log, so that a failure seen once (in CI, on a temp home removed at
 * the end; a test shows the last 100 lines of its output) can be read
 * afterwards.
 */
static void
show_logs(drill *d)
{
	static char buf[8192];

	show_warnings(d->st.api.log_path, 8);
	for (int i = 0; i < d->st.n_workers && i < AX_STACK_MAX_WORKERS; i++)
		show_warnings(d->st.workers[i].log_path, 8);
	if (d->k->standby)
		show_warnings(d->st.standby.log_path, 8);
	show_warnings(d->st.axd.log_path, 40);
	fprintf(stderr, "---- end of %s ----\n%s\n", d->st.axd.log_path,
	        ax_proc_log_tail(d->st.axd.log_path, 16, buf, sizeof(buf)));
}

/* One repetition: workload, fault, settle, tally. 0, or 1 when the drill
 * could not run (then t is not filled). */
static int
repetition(drill *d, ax_drill_tally *t)
{
	pthread_t th;
	int       thread = 0, rc = 1;
	int64_t   up, fault_at;
	PGresult *r;

	ax_api_client *api = d->tr.api;
	memset(&d->tr, 0, sizeof(d->tr));
	d->tr.api   = api;
	d->fault_us = 0;
	unlink(d->marks);
	if ((r = query(d, "TRUNCATE dags, task_templates CASCADE")) == NULL) {
		fprintf(stderr, "axctl drill: %s", PQerrorMessage(d->db));
		return 1;
	}
	PQclear(r);
	if (write_workload(d) || start_stack(d))
		goto out;
	up       = ax_clock_mono_us();
	fault_at = up + FAULT_AFTER_US;
	d->bound_mono =
	    up + BOUND_US + (int64_t) d->o.seconds * AX_USEC_PER_SEC;
	if (d->k->trigger_gap_ms > 0) {
		int64_t from = up + AX_USEC_PER_SEC / 2;
		plan_triggers(
		    &d->tr, from,
		    (int) ((fault_at + 3 * AX_USEC_PER_SEC - from) /
		           (d->k->trigger_gap_ms * AX_USEC_PER_MSEC)),
		    d->k->trigger_gap_ms);
		if (pthread_create(&th, NULL, trigger_thread, &d->tr) != 0) {
			fail("trigger thread",
			     ax_err_set(AX_EIO, "%s", strerror(errno)));
			goto out;
		}
		thread = 1;
	}
	if (drill_sleep(d, fault_at - ax_clock_mono_us()) || d->k->inject(d))
		goto out;
	settle(d);
	if (g_stop)
		goto out;
	if (thread) {
		atomic_store(&d->tr.stop, 1);
		pthread_join(th, NULL);
		thread = 0;
	}
	tally(d, t);
	if (!ax_drill_ok(t))
		show_logs(d);
	for (int k = 0; k < AX_STACK_CHILDREN; k++)
		t->restarts += d->st.sup[k].restarts;
	rc = 0;
out:
	if (thread) {
		atomic_store(&d->tr.stop, 1);
		pthread_join(th, NULL);
	}
	stop_stack(d);
	return rc;
}

/* ---- options, set-up, main ----------------------------------------------
 */

static void
usage(FILE *f)
{
	fprintf(f,
	        "usage: axctl drill NAME [--home DIR] [--json] "
	        "[--repeat N] [--seconds N]\n"
	        "\n"
	        "Runs a workload on a standalone home, injects one fault, "
	        "waits for\nAX to settle and counts, from marks the tasks "
	        "write themselves,\nwhat ran once, was lost or ran twice.\n"
	        "\nDrills:\n");
	for (const drill_kind *k = kinds; k->name != NULL; k++)
		fprintf(f, "  %-20s %s\n", k->name, k->what);
	fprintf(f,
	        "\n"
	        "  --home DIR   AX home (default: a temp dir, removed)\n"
	        "  --json       print one JSON object: drill, ok, expected, "
	        "once,\n"
	        "               redone, lost, twice, stuck, stuck_runs, "
	        "disagree,\n"
	        "               unexpected, refused, starts, restarts,\n"
	        "               recovery_s, *_keys\n"
	        "  --repeat N   run the drill N times (1-100); the report "
	        "sums them\n"
	        "               and gives recovery_median_s and "
	        "recovery_max_s\n"
	        "  --seconds N  stop-db: seconds PostgreSQL stays down "
	        "(1-600,\n"
	        "               default 5)\n"
	        "\n"
	        "Recovery: from the fault to the first task started by an "
	        "attempt\ndispatched after it. Each drill is bounded to about "
	        "60 s (plus\n--seconds).\n"
	        "Exit status: 0 when nothing was lost, run twice, stuck or "
	        "contradicted\nby the database; 1 otherwise or on a failure; "
	        "2 usage error.\n");
}

static int
int_opt(const char *name, const char *v, int lo, int hi, int *out)
{
	char *end;
	long  n;

	errno = 0;
	n     = v != NULL ? strtol(v, &end, 10) : 0;
	if (v == NULL || errno != 0 || end == v || *end != '\0' || n < lo ||
	    n > hi) {
		fprintf(stderr,
		        "axctl drill: %s must be an integer from %d to %d, "
		        "not '%s'\n",
		        name, lo, hi, v != NULL ? v : "");
		return -1;
	}
	*out = (int) n;
	return 0;
}

/* 0 ok, 1 --help shown, 2 usage error. */
static int
parse(int argc, char **argv, drill_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->repeat  = 1;
	o->seconds = 5;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 1;
		}
		if (!strcmp(a, "--json"))
			o->json = 1;
		else if (!strcmp(a, "--home") && i + 1 < argc)
			o->home = argv[++i];
		else if (!strncmp(a, "--home=", 7))
			o->home = a + 7;
		else if (!strcmp(a, "--repeat") ||
		         !strncmp(a, "--repeat=", 9)) {
			const char *v = a[8] == '=' ? a + 9 : argv[++i];
			if (int_opt("--repeat", i < argc ? v : NULL, 1, 100,
			            &o->repeat))
				return 2;
		} else if (!strcmp(a, "--seconds") ||
		           !strncmp(a, "--seconds=", 10)) {
			const char *v = a[9] == '=' ? a + 10 : argv[++i];
			if (int_opt("--seconds", i < argc ? v : NULL, 1, 600,
			            &o->seconds))
				return 2;
		} else if (a[0] != '-' && o->name == NULL)
			o->name = a;
		else {
			fprintf(stderr,
			        "axctl drill: unexpected argument '%s'; run "
			        "`axctl drill --help`\n",
			        a);
			return 2;
		}
	}
	if (o->name == NULL) {
		usage(stderr);
		return 2;
	}
	return 0;
}

static int
setup(drill *d)
{
	int    port;
	ax_err rv;

	if (d->o.home != NULL && strchr(d->o.home, '\'') != NULL) {
		fprintf(stderr,
		        "axctl drill: --home %s: a path without ' please (it "
		        "goes into the tasks' commands)\n",
		        d->o.home);
		return 1;
	}
	say(d, "starting PostgreSQL");
	if ((rv = ax_stack_home_open(&d->h, d->o.home, "drill")) != AX_OK)
		return fail("database", rv);
	say(d, "home %s", d->h.home);
	snprintf(d->marks, sizeof(d->marks), "%s/marks", d->h.home);
	snprintf(d->dagdir, sizeof(d->dagdir), "%s/drill-dags", d->h.home);
	if (mkdir(d->dagdir, 0755) != 0 && errno != EEXIST)
		return fail(
		    "home",
		    ax_err_set(AX_EIO, "%s: %s", d->dagdir, strerror(errno)));
	if ((port = ax_stack_free_port()) <= 0)
		return fail("API port", ax_err_set(AX_EIO, "no free port"));
	snprintf(d->api_url, sizeof(d->api_url), "http://127.0.0.1:%d", port);
	d->db = PQconnectdb(d->h.w.dsn);
	if (PQstatus(d->db) != CONNECTION_OK) {
		fprintf(stderr, "axctl drill: %s", PQerrorMessage(d->db));
		return 1;
	}
	PQclear(PQexec(d->db, "SET client_min_messages = warning"));
	/* crash-db: the WAL writer flushes a commit that did not wait for
	 * the flush within 200 ms by default; at 10 s such a commit is lost
	 * in the crash unless a durable commit after it flushed it, which
	 * is what the pipeline's ordering must ensure */
	if (d->k->inject == inject_crash_db) {
		PGresult *r  = PQexec(d->db,
		                      "ALTER SYSTEM SET wal_writer_delay "
		                       "= '10s'");
		int       ok = PQresultStatus(r) == PGRES_COMMAND_OK;
		PQclear(r);
		r = PQexec(d->db, "SELECT pg_reload_conf()");
		ok &= PQresultStatus(r) == PGRES_TUPLES_OK;
		PQclear(r);
		if (!ok) {
			fprintf(stderr, "axctl drill: wal_writer_delay: %s",
			        PQerrorMessage(d->db));
			return 1;
		}
	}
	return 0;
}

static void
teardown(drill *d)
{
	stop_stack(d);
	ax_api_client_free(d->tr.api);
	PQfinish(d->db);
	ax_stack_home_close(&d->h);
}

int
ax_cmd_drill(int argc, char **argv)
{
	drill            d;
	ax_drill_tally   total, t;
	double           rec[100];
	struct sigaction act;
	int              rc, ok = 1, done = 0;

	memset(&d, 0, sizeof(d));
	if ((rc = parse(argc, argv, &d.o)) != 0)
		return rc == 1 ? 0 : 2;
	for (d.k = kinds; d.k->name != NULL; d.k++)
		if (strcmp(d.k->name, d.o.name) == 0)
			break;
	if (d.k->name == NULL) {
		fprintf(stderr,
		        "axctl drill: unknown drill '%s'; run `axctl drill "
		        "--help` for the list\n",
		        d.o.name);
		return 2;
	}
	if (d.k->inject != inject_stop_db)
		d.o.seconds = 0;
	ax_log_init(AX_LOG_WARN, 2);
	memset(&act, 0, sizeof(act));
	act.sa_handler = on_stop;
	act.sa_flags   = SA_RESTART;
	sigaction(SIGINT, &act, NULL);
	sigaction(SIGTERM, &act, NULL);
	signal(SIGPIPE, SIG_IGN);
	memset(&total, 0, sizeof(total));
	total.recovery_s = -1;
	rc               = setup(&d);
	for (int i = 0; rc == 0 && i < d.o.repeat && !g_stop; i++) {
		if (d.o.repeat > 1)
			say(&d, "repetition %d of %d", i + 1, d.o.repeat);
		if ((rc = repetition(&d, &t)) != 0)
			break;
		rec[done++] = t.recovery_s;
		ok &= ax_drill_ok(&t);
		ax_drill_tally_add(&total, &t);
		if (d.o.repeat > 1)
			ax_drill_print(stderr, d.k->name, &t, NULL, 0);
	}
	teardown(&d);
	if (rc != 0 || g_stop)
		return 1;
	if (d.o.json)
		ax_drill_json(stdout, d.k->name, &total,
		              d.o.repeat > 1 ? rec : NULL,
		              d.o.repeat > 1 ? (size_t) done : 0);
	else
		ax_drill_print(stdout, d.k->name, &total,
		               d.o.repeat > 1 ? rec : NULL,
		               d.o.repeat > 1 ? (size_t) done : 0);
	return ok ? 0 : 1;
}
