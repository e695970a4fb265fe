/*
 * test_standalone.c - `axctl standalone` as a user runs it: the real axctl
 * (in $AX_BIN_DIR) with its own embedded PostgreSQL in a temp home and a
 * DAG folder holding a seconds-level diamond; the diamond's instances
 * succeed; SIGTERM stops everything: exit 0, and no postgres, axd or
 * ax-worker process of that home is left.
 *
 * /healthz answers 200 only once $home/admin.token is there: the first
 * 200 of a tight poll finds the token file whole.
 *
 * Supervision: kill -9 of axd, a worker and ax-api in turn (and of the
 * embedded PostgreSQL): each comes back with a new pid, the others keep
 * theirs, and a run triggered through the API afterwards succeeds.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "pg_embed.h"
#include "proc.h"

static char home[64];
static char dags[96];

static void
setup(void)
{
	snprintf(home, sizeof(home), "/tmp/ax-e2e-sa-XXXXXX");
	cr_assert_not_null(mkdtemp(home));
	/* PostgreSQL runs as another user when we are root: let it in. */
	cr_assert_eq(chmod(home, 0755), 0);
	snprintf(dags, sizeof(dags), "%s/dags", home);
	cr_assert_eq(mkdir(dags, 0755), 0);
}

/* Processes whose command line mentions the home, other than us. */
static int
leftovers(char *names, size_t len)
{
	DIR           *d = opendir("/proc");
	struct dirent *de;
	int            n = 0;

	names[0] = '\0';
	cr_assert_not_null(d);
	while ((de = readdir(d)) != NULL) {
		char   path[300], cmd[4096];
		int    pid = atoi(de->d_name);
		size_t r;
		FILE  *f;

		if (pid <= 0 || pid == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		r = fread(cmd, 1, sizeof(cmd) - 1, f);
		fclose(f);
		for (size_t i = 0; i < r; i++)
			if (cmd[i] == '\0')
				cmd[i] = ' ';
		cmd[r] = '\0';
		if (strstr(cmd, home) == NULL)
			continue;
		n++;
		size_t used = strlen(names);
		snprintf(names + used, len - used, "[%d] %.200s\n", pid, cmd);
	}
	closedir(d);
	return n;
}

static void
teardown(void)
{
	char         cmd[128], names[2048];
	ax_pg_embed *pg = NULL;

	/* If the test failed midway, do not leave a server behind. */
	if (leftovers(names, sizeof(names)) > 0 &&
	    ax_pg_embed_new(home, NULL, &pg) == AX_OK) {
		ax_pg_embed_down(pg);
		ax_pg_embed_free(pg);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", home);
	if (system(cmd) != 0)
		cr_log_warn("cannot remove %s", home);
}

TestSuite(standalone, .init = setup, .fini = teardown, .timeout = 400);

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

static void
dump(const ax_proc *p)
{
	char tail[8192], path[256];
	fprintf(stderr, "---- axctl output ----\n%s",
	        ax_proc_log_tail(p->log_path, 60, tail, sizeof(tail)));
	snprintf(path, sizeof(path), "%s/logs/axd.log", home);
	fprintf(stderr, "---- axd.log ----\n%s",
	        ax_proc_log_tail(path, 30, tail, sizeof(tail)));
	snprintf(path, sizeof(path), "%s/logs/worker-1.log", home);
	fprintf(stderr, "---- worker-1.log ----\n%s",
	        ax_proc_log_tail(path, 30, tail, sizeof(tail)));
}

/* Starts `axctl argv...` (output in $home/axctl.out, its path in log)
 * and opens a handle on the home's embedded PostgreSQL. */
static void
start_standalone(ax_proc *p, char **argv, char *log, size_t len,
                 ax_pg_embed **pg)
{
	char         bin[PATH_MAX];
	ax_proc_opts opts = { .pdeathsig = SIGTERM };

	cr_assert_eq(ax_proc_find_bin("axctl", bin, sizeof(bin)), AX_OK, "%s",
	             ax_err_detail());
	snprintf(log, len, "%s/axctl.out", home);
	cr_assert_eq(ax_proc_start(p, "axctl", bin, argv, log, &opts), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_eq(ax_pg_embed_new(home, NULL, pg), AX_OK);
}

/* SIGTERM to standalone: it must stop everything and exit 0. */
static void
stop_with_sigterm(ax_proc *p)
{
	char how[96];

	kill(p->pid, SIGTERM);
	if (ax_proc_wait(p, 90 * AX_USEC_PER_SEC) != AX_OK) {
		dump(p);
		ax_proc_stop(p, AX_USEC_PER_SEC);
		cr_assert_fail("axctl standalone did not stop on SIGTERM");
	}
	if (!WIFEXITED(p->status) || WEXITSTATUS(p->status) != 0)
		dump(p);
	cr_assert_str_eq(ax_proc_describe(p, how, sizeof(how)),
	                 "exited with status 0");
}

/* The integer a one-value query answers; -1 when the database cannot be
 * reached (yet). */
static int64_t
count_of(const char *dsn, const char *sql)
{
	PGconn   *c = PQconnectdb(dsn);
	int64_t   v = -1;
	PGresult *r;

	if (PQstatus(c) == CONNECTION_OK) {
		r = PQexec(c, sql);
		if (PQresultStatus(r) == PGRES_TUPLES_OK)
			v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
		PQclear(r);
	}
	PQfinish(c);
	return v;
}

/* Successful instances of the first successful demo.diamond run. */
static int64_t
diamond_done(const char *dsn)
{
	return count_of(dsn,
	                "SELECT count(*) FROM task_instances t JOIN dags d "
	                "ON d.id = t.dag_id JOIN dag_runs r ON r.id = "
	                "t.dag_run_id WHERE d.name = 'demo.diamond' AND "
	                "r.state = 'SUCCESS' AND t.state = 'SUCCESS'");
}

/* The HTTP status of GET /healthz on 127.0.0.1:port; 0 when nothing
 * answers (yet). */
static int
healthz_status(int port)
{
	struct sockaddr_in a        = { .sin_family = AF_INET,
		                        .sin_port   = htons((uint16_t) port) };
	const char        *rq       = "GET /healthz HTTP/1.1\r\nHost: x\r\n"
	                              "Connection: close\r\n\r\n";
	char               buf[256] = "";
	int                fd = socket(AF_INET, SOCK_STREAM, 0), st = 0;
	ssize_t            n;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *) &a, sizeof(a)) == 0 &&
	    write(fd, rq, strlen(rq)) == (ssize_t) strlen(rq) &&
	    (n = read(fd, buf, sizeof(buf) - 1)) > 12) {
		buf[n] = '\0';
		sscanf(buf, "HTTP/1.%*d %d", &st);
	}
	close(fd);
	return st;
}

/* Polls /healthz every 5 ms until it answers 200; then admin.token must
 * hold a whole token. */
static void
expect_token_when_healthy(ax_proc *p, int port)
{
	char    path[160], tok[128] = "", how[96];
	int64_t deadline = ax_clock_mono_us() + 120 * AX_USEC_PER_SEC;
	FILE   *f;

	while (healthz_status(port) != 200) {
		if (!ax_proc_poll(p)) {
			dump(p);
			cr_assert_fail("axctl standalone %s",
			               ax_proc_describe(p, how, sizeof(how)));
		}
		cr_assert_lt(ax_clock_mono_us(), deadline,
		             "/healthz never answered 200");
		ax_clock_sleep_us(5 * AX_USEC_PER_MSEC);
	}
	snprintf(path, sizeof(path), "%s/admin.token", home);
	f = fopen(path, "r");
	cr_assert_not_null(f, "/healthz answers 200 but %s is missing", path);
	cr_assert_not_null(fgets(tok, sizeof(tok), f));
	fclose(f);
	cr_assert(strncmp(tok, "axt_", 4) == 0 && strchr(tok, '\n') != NULL,
	          "admin.token is not a whole token: '%s'", tok);
}

Test(standalone, runs_the_dags_and_stops_everything_on_sigterm)
{
	char         log[128], names[4096], how[96];
	ax_pg_embed *pg;
	ax_proc      p;
	int64_t      deadline;
	char        *argv[] = { "axctl",  "standalone", "--home",    home,
		                "--dags", dags,         "--workers", "1",
		                "--port", "18099",      NULL };

	{
		char path[160];
		snprintf(path, sizeof(path), "%s/diamond.yaml", dags);
		write_file(
		    path,
		    "kind: DAG\nname: demo.diamond\n"
		    "schedule: {cron: \"*/3 * * * * ?\", timezone: UTC}\n"
		    "tasks:\n"
		    "  - {name: a, command: \"echo {{ ds }}\"}\n"
		    "  - {name: b, command: \"echo b\", depends_on: [a]}\n"
		    "  - {name: c, command: \"echo c\", depends_on: [a]}\n"
		    "  - {name: d, command: \"echo d\", depends_on: [b, "
		    "c]}\n");
	}
	start_standalone(&p, argv, log, sizeof(log), &pg);
	expect_token_when_healthy(&p, 18099);

	deadline = ax_clock_mono_us() + 150 * AX_USEC_PER_SEC;
	while (diamond_done(ax_pg_embed_dsn(pg)) < 4) {
		if (!ax_proc_poll(&p)) {
			dump(&p);
			cr_assert_fail("axctl standalone %s",
			               ax_proc_describe(&p, how, sizeof(how)));
		}
		if (ax_clock_mono_us() > deadline) {
			dump(&p);
			ax_proc_stop(&p, 30 * AX_USEC_PER_SEC);
			cr_assert_fail("demo.diamond did not succeed in time");
		}
		ax_clock_sleep_us(250 * AX_USEC_PER_MSEC);
	}
	ax_pg_embed_free(pg);

	stop_with_sigterm(&p);
	/* Give reparented processes a moment to be reaped by init. */
	for (int i = 0; i < 20 && leftovers(names, sizeof(names)) > 0; i++)
		ax_clock_sleep_us(100 * AX_USEC_PER_MSEC);
	cr_assert_eq(leftovers(names, sizeof(names)), 0,
	             "processes of the home left:\n%s", names);
	{
		char tail[8192];
		ax_proc_log_tail(log, 200, tail, sizeof(tail));
		cr_assert(strstr(tail, "demo.diamond") != NULL, "%s", tail);
		cr_assert(strstr(tail, "run ") != NULL,
		          "a line per finished run:\n%s", tail);
		cr_assert(strstr(tail, "stopped.") != NULL, "%s", tail);
	}
}

/* ---- supervision --------------------------------------------------------
 */

/* Reads /proc/PID/FILE (NULs turned into newlines) into buf. */
static size_t
proc_file(int pid, const char *file, char *buf, size_t len)
{
	char   path[64];
	FILE  *f;
	size_t r;

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, file);
	if ((f = fopen(path, "r")) == NULL)
		return 0;
	r = fread(buf, 1, len - 1, f);
	fclose(f);
	for (size_t i = 0; i < r; i++)
		if (buf[i] == '\0')
			buf[i] = '\n';
	buf[r] = '\0';
	return r;
}

/*
 * The pid of the daemon of this home whose executable is named exe (axd,
 * ax-worker, ax-api); for a worker, the one with AX_WORKER_ID=id. 0 when
 * none runs.
 */
static int
daemon_pid(const char *exe, const char *id)
{
	DIR           *d = opendir("/proc");
	struct dirent *de;
	int            found = 0;

	cr_assert_not_null(d);
	while (found == 0 && (de = readdir(d)) != NULL) {
		char        path[64], link[PATH_MAX], buf[16384], want[64];
		int         pid = atoi(de->d_name);
		ssize_t     n;
		const char *base;

		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/exe", pid);
		if ((n = readlink(path, link, sizeof(link) - 1)) < 0)
			continue;
		link[n] = '\0';
		base    = strrchr(link, '/') ? strrchr(link, '/') + 1 : link;
		if (strcmp(base, exe) != 0 ||
		    proc_file(pid, "cmdline", buf, sizeof(buf)) == 0 ||
		    strstr(buf, home) == NULL)
			continue;
		/* a zombie has no cmdline; a dying one no longer counts */
		proc_file(pid, "stat", buf, sizeof(buf));
		if (strstr(buf, ") Z ") != NULL)
			continue;
		if (id != NULL) {
			snprintf(want, sizeof(want), "\nAX_WORKER_ID=%s\n",
			         id);
			memmove(buf + 1, buf, sizeof(buf) - 1);
			buf[0] = '\n';
			if (proc_file(pid, "environ", buf + 1,
			              sizeof(buf) - 1) == 0 ||
			    strstr(buf, want) == NULL)
				continue;
		}
		found = pid;
	}
	closedir(d);
	return found;
}

/* 1 when the axd with this pid holds the scheduler lease. */
static int
holds_lease(const char *dsn, int pid)
{
	PGconn   *c = PQconnectdb(dsn);
	int       v = 0;
	char      holder[64];
	PGresult *r;

	snprintf(holder, sizeof(holder), "%% pid %d", pid);
	const char *params[] = { holder };
	if (PQstatus(c) == CONNECTION_OK) {
		r = PQexecParams(c,
		                 "SELECT count(*) FROM scheduler_lease WHERE "
		                 "holder LIKE $1 AND expires_at > now()",
		                 1, NULL, params, NULL, NULL, 0);
		v = PQresultStatus(r) == PGRES_TUPLES_OK &&
		    strcmp(PQgetvalue(r, 0, 0), "1") == 0;
		PQclear(r);
	}
	PQfinish(c);
	return v;
}

typedef struct role {
	const char *exe, *id;
	int         pid;
} role;

/* Successful runs of sup.once; -1 while the database is unreachable. */
static int64_t
runs_done(const char *dsn)
{
	return count_of(dsn,
	                "SELECT count(*) FROM dag_runs r JOIN dags d ON "
	                "d.id = r.dag_id WHERE d.name = 'sup.once' AND "
	                "r.state = 'SUCCESS'");
}

/* Triggers sup.once through ax-api (the daemons of the home may still be
 * coming back: retried for 60 s) and waits until one more run succeeded.
 * every_s > 0: triggers again every every_s seconds meanwhile (a trigger
 * is a NOTIFY, which a daemon still reconnecting does not hear). */
static void
trigger_and_wait(ax_proc *sa, const char *dsn, int port, const char *after,
                 int every_s)
{
	char    cmd[PATH_MAX + 512], dir[PATH_MAX];
	int64_t before = runs_done(dsn), deadline, again;
	int     ok     = 0;

	cr_assert(getenv("AX_BIN_DIR") != NULL);
	snprintf(dir, sizeof(dir), "%s", getenv("AX_BIN_DIR"));
	snprintf(cmd, sizeof(cmd),
	         "'%s/axctl' dag trigger sup.once --server "
	         "http://127.0.0.1:%d --token-file %s/admin.token "
	         ">/dev/null 2>&1",
	         dir, port, home);
	deadline = ax_clock_mono_us() + 60 * AX_USEC_PER_SEC;
	while (!ok && ax_clock_mono_us() < deadline) {
		ok = system(cmd) == 0;
		if (!ok)
			ax_clock_sleep_us(500 * AX_USEC_PER_MSEC);
	}
	if (!ok) {
		dump(sa);
		cr_assert_fail("after %s: the API refused the trigger: %s",
		               after, cmd);
	}
	deadline = ax_clock_mono_us() + 90 * AX_USEC_PER_SEC;
	again    = ax_clock_mono_us() + every_s * AX_USEC_PER_SEC;
	while (runs_done(dsn) <= before) {
		if (every_s > 0 && ax_clock_mono_us() > again) {
			if (system(cmd) != 0)
				fprintf(stderr, "trigger refused: %s\n", cmd);
			again = ax_clock_mono_us() + every_s * AX_USEC_PER_SEC;
		}
		if (!ax_proc_poll(sa) || ax_clock_mono_us() > deadline) {
			dump(sa);
			cr_assert_fail("after %s: the triggered run did not "
			               "succeed (standalone %s)",
			               after,
			               sa->running ? "running" : "exited");
		}
		ax_clock_sleep_us(200 * AX_USEC_PER_MSEC);
	}
}

/* Waits until every role has a pid (a fresh start: 60 s). */
static void
find_all(ax_proc *sa, role *roles, size_t n)
{
	int64_t deadline = ax_clock_mono_us() + 60 * AX_USEC_PER_SEC;

	for (size_t i = 0; i < n; i++) {
		while ((roles[i].pid =
		            daemon_pid(roles[i].exe, roles[i].id)) == 0) {
			if (ax_clock_mono_us() > deadline) {
				dump(sa);
				cr_assert_fail("no %s %s is running",
				               roles[i].exe,
				               roles[i].id ? roles[i].id : "");
			}
			ax_clock_sleep_us(100 * AX_USEC_PER_MSEC);
		}
	}
}

Test(standalone, restarts_a_killed_daemon_and_keeps_the_others)
{
	char         log[128], path[160], ps[16];
	char         tail[16384];
	ax_pg_embed *pg;
	ax_proc      p;
	int          port    = 18000 + (int) (getpid() % 1000);
	char        *argv[]  = { "axctl",  "standalone", "--home",    home,
		                 "--dags", dags,         "--workers", "2",
		                 "--port", ps,           NULL };
	role         roles[] = {
		        { "axd", NULL, 0 },
		        { "ax-worker", "standalone-1", 0 },
		        { "ax-worker", "standalone-2", 0 },
		        { "ax-api", NULL, 0 },
	};
	size_t n = sizeof(roles) / sizeof(roles[0]);

	snprintf(ps, sizeof(ps), "%d", port);
	snprintf(path, sizeof(path), "%s/once.yaml", dags);
	write_file(path,
	           "kind: DAG\nname: sup.once\n"
	           "concurrency: {max_active_runs: 10, policy: "
	           "parallel}\n"
	           "tasks:\n  - {name: a, command: \"echo a\"}\n");
	start_standalone(&p, argv, log, sizeof(log), &pg);
	find_all(&p, roles, n);
	trigger_and_wait(&p, ax_pg_embed_dsn(pg), port, "start-up", 0);

	/* axd, worker-1, ax-api: kill -9 each in turn */
	for (size_t v = 0; v < n; v++) {
		int old;
		if (v == 2)
			continue; /* worker-2 stays: one worker victim */
		old = roles[v].pid;
		cr_assert_eq(kill(old, SIGKILL), 0);
		int64_t deadline = ax_clock_mono_us() + 30 * AX_USEC_PER_SEC;
		while ((roles[v].pid =
		            daemon_pid(roles[v].exe, roles[v].id)) == 0 ||
		       roles[v].pid == old) {
			if (!ax_proc_poll(&p) ||
			    ax_clock_mono_us() > deadline) {
				dump(&p);
				cr_assert_fail("%s %s was not restarted after "
				               "kill -9 (standalone %s)",
				               roles[v].exe,
				               roles[v].id ? roles[v].id : "",
				               p.running ? "running"
				                         : "exited");
			}
			ax_clock_sleep_us(100 * AX_USEC_PER_MSEC);
		}
		for (size_t o = 0; o < n; o++)
			if (o != v)
				cr_assert_eq(
				    daemon_pid(roles[o].exe, roles[o].id),
				    roles[o].pid,
				    "%s %s changed pid when %s was "
				    "killed",
				    roles[o].exe,
				    roles[o].id ? roles[o].id : "",
				    roles[v].exe);
		/* A trigger is only a NOTIFY: wait until the new axd is the
		 * active one (it takes over once the old lease lapses). */
		deadline = ax_clock_mono_us() + 60 * AX_USEC_PER_SEC;
		while (v == 0 &&
		       !holds_lease(ax_pg_embed_dsn(pg), roles[0].pid)) {
			if (ax_clock_mono_us() > deadline) {
				dump(&p);
				cr_assert_fail("the restarted axd never took "
				               "the scheduler lease");
			}
			ax_clock_sleep_us(200 * AX_USEC_PER_MSEC);
		}
		trigger_and_wait(&p, ax_pg_embed_dsn(pg), port, roles[v].exe,
		                 0);
	}
	ax_proc_log_tail(log, 200, tail, sizeof(tail));
	cr_assert(strstr(tail, "axd (pid ") != NULL &&
	              strstr(tail, "killed by signal 9") != NULL,
	          "the deaths are logged:\n%s", tail);
	cr_assert(strstr(tail, "worker-1 restarted (pid ") != NULL &&
	              strstr(tail, "ax-api restarted (pid ") != NULL,
	          "the restarts are logged:\n%s", tail);

	/* the embedded PostgreSQL: started again, the daemons reconnect */
	{
		char pidfile[160], line[32] = "";
		snprintf(pidfile, sizeof(pidfile), "%s/pg/data/postmaster.pid",
		         home);
		FILE *f = fopen(pidfile, "r");
		cr_assert_not_null(f);
		cr_assert_not_null(fgets(line, sizeof(line), f));
		fclose(f);
		cr_assert_eq(kill(atoi(line), SIGKILL), 0);
	}
	trigger_and_wait(&p, ax_pg_embed_dsn(pg), port, "PostgreSQL", 5);
	ax_pg_embed_free(pg);
	ax_proc_log_tail(log, 200, tail, sizeof(tail));
	cr_assert(strstr(tail, "PostgreSQL started again") != NULL, "%s",
	          tail);

	stop_with_sigterm(&p);
}
