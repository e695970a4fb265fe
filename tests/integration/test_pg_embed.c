/*
 * test_pg_embed.c - the embedded PostgreSQL cluster against the real
 * binaries: life cycle (up, status, reuse, down), the errors a user sees
 * for a bad home or missing binaries, and the test harness itself.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"
#include "log.h"
#include "pg_embed.h"
#include "pg_harness.h"

static char home_base[64];

static void
setup(void)
{
	ax_log_init(AX_LOG_WARN, 2);
	snprintf(home_base, sizeof(home_base), "/tmp/ax-test-embed-XXXXXX");
	cr_assert_not_null(mkdtemp(home_base));
	cr_assert_eq(chmod(home_base, 0711), 0);
}

static void
teardown(void)
{
	cr_assert_eq(ax_fs_rm_rf(home_base), AX_OK, "%s", ax_err_detail());
}

TestSuite(pg_embed, .init = setup, .fini = teardown, .timeout = 120);

/* Runs one query on dsn and returns the first value (static buffer). */
static const char *
query1(const char *dsn, const char *sql)
{
	static char out[256];
	PGconn     *c = PQconnectdb(dsn);
	cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s: %s", dsn,
	             PQerrorMessage(c));
	PGresult *r = PQexec(c, sql);
	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s: %s", sql,
	             PQerrorMessage(c));
	snprintf(out, sizeof(out), "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	PQfinish(c);
	return out;
}

/* A fast (test settings) cluster in home_base/home, not started. */
static ax_pg_embed *
fast_embed(char *home, size_t len)
{
	ax_pg_embed *e;

	snprintf(home, len, "%s/home", home_base);
	cr_assert_eq(ax_pg_embed_new(home, NULL, &e), AX_OK, "%s",
	             ax_err_detail());
	ax_pg_embed_set_fast(e, 1);
	return e;
}

Test(pg_embed, life_cycle)
{
	char         home[128], pidfile[160];
	ax_pg_embed *e;
	int          running = -1;

	e = fast_embed(home, sizeof(home));

	/* Before up: nothing exists, nothing runs; down is a no-op. */
	cr_assert_eq(ax_pg_embed_status(e, &running), AX_OK);
	cr_assert_eq(running, 0);
	cr_assert_eq(ax_pg_embed_down(e), AX_OK, "%s", ax_err_detail());

	cr_assert_eq(ax_pg_embed_up(e), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_pg_embed_status(e, &running), AX_OK);
	cr_assert_eq(running, 1);
	cr_assert_str_eq(
	    query1(ax_pg_embed_dsn(e), "SELECT current_database()"), "ax");
	/* Unix socket only: no TCP listener. */
	cr_assert_str_eq(query1(ax_pg_embed_dsn(e), "SHOW listen_addresses"),
	                 "");
	cr_assert_str_eq(query1(ax_pg_embed_dsn(e), "SHOW fsync"), "off");

	/* A second up reuses the running server: same start time. */
	char started[256];
	snprintf(
	    started, sizeof(started), "%s",
	    query1(ax_pg_embed_dsn(e), "SELECT pg_postmaster_start_time()"));
	cr_assert_eq(ax_pg_embed_up(e), AX_OK, "%s", ax_err_detail());
	cr_assert_str_eq(
	    query1(ax_pg_embed_dsn(e), "SELECT pg_postmaster_start_time()"),
	    started, "second up restarted the server");
	snprintf(pidfile, sizeof(pidfile), "%s/postmaster.pid",
	         ax_pg_embed_datadir(e));

	/* Data written survives down + up (reuse of the cluster). */
	PGconn *c = PQconnectdb(ax_pg_embed_dsn(e));
	cr_assert_eq(PQstatus(c), CONNECTION_OK);
	PQclear(PQexec(c,
	               "CREATE TABLE kept (v int); INSERT INTO kept "
	               "VALUES (42)"));
	PQfinish(c);

	cr_assert_eq(ax_pg_embed_down(e), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_pg_embed_status(e, &running), AX_OK);
	cr_assert_eq(running, 0);
	cr_assert_eq(access(pidfile, F_OK), -1, "postmaster.pid still there");
	cr_assert_eq(ax_pg_embed_down(e), AX_OK, "second down: %s",
	             ax_err_detail());

	cr_assert_eq(ax_pg_embed_up(e), AX_OK, "%s", ax_err_detail());
	cr_assert_str_eq(query1(ax_pg_embed_dsn(e), "SELECT v FROM kept"),
	                 "42");
	cr_assert_eq(ax_pg_embed_down(e), AX_OK, "%s", ax_err_detail());
	ax_pg_embed_free(e);
}

/* 1 when pid runs no more: gone, or a zombie that whoever adopted it has
 * not reaped yet. */
static int
gone(pid_t pid)
{
	char  path[64], line[512], st = 'Z', *rp;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
	if ((f = fopen(path, "r")) == NULL)
		return 1;
	if (fgets(line, sizeof(line), f) != NULL &&
	    (rp = strrchr(line, ')')) != NULL)
		(void) sscanf(rp + 1, " %c", &st);
	fclose(f);
	return st == 'Z' || st == 'X';
}

/* A crash as fault drills inject it: every process of the server is gone
 * (a backend of an open session too), postmaster.pid is left behind as
 * after a real crash, and the next up recovers from the WAL: a committed
 * row is there, the server log says recovery ran. */
Test(pg_embed, crash_kills_every_process_and_recovers)
{
	char         home[128], pidfile[160], log[160], buf[65536];
	ax_pg_embed *e;
	int          running = -1;

	e = fast_embed(home, sizeof(home));
	cr_assert_eq(ax_pg_embed_crash(e), AX_OK, "nothing runs yet: %s",
	             ax_err_detail());
	cr_assert_eq(ax_pg_embed_up(e), AX_OK, "%s", ax_err_detail());
	PGconn *c = PQconnectdb(ax_pg_embed_dsn(e));
	cr_assert_eq(PQstatus(c), CONNECTION_OK);
	/* a durable commit (a fast cluster's default is not) */
	PQclear(PQexec(c,
	               "SET synchronous_commit = on; CREATE TABLE kept "
	               "(v int); INSERT INTO kept VALUES (7)"));
	PGresult *r       = PQexec(c, "SELECT pg_backend_pid()");
	pid_t     backend = (pid_t) atol(PQgetvalue(r, 0, 0));
	PQclear(r);
	pid_t ckpt = (pid_t) atol(
	    query1(ax_pg_embed_dsn(e),
	           "SELECT pid FROM pg_stat_activity WHERE backend_type = "
	           "'checkpointer'"));
	cr_assert_gt(backend, 0);
	cr_assert_gt(ckpt, 0);

	cr_assert_eq(ax_pg_embed_crash(e), AX_OK, "%s", ax_err_detail());
	cr_assert(gone(backend), "the session's backend survived");
	cr_assert(gone(ckpt), "the checkpointer survived");
	cr_assert_eq(ax_pg_embed_status(e, &running), AX_OK);
	cr_assert_eq(running, 0);
	snprintf(pidfile, sizeof(pidfile), "%s/postmaster.pid",
	         ax_pg_embed_datadir(e));
	cr_assert_eq(access(pidfile, F_OK), 0,
	             "a crash leaves postmaster.pid");
	r = PQexec(c, "SELECT 1");
	cr_assert_neq(PQresultStatus(r), PGRES_TUPLES_OK,
	              "the session still answers");
	PQclear(r);
	PQfinish(c);

	cr_assert_eq(ax_pg_embed_up(e), AX_OK, "%s", ax_err_detail());
	cr_assert_str_eq(query1(ax_pg_embed_dsn(e), "SELECT v FROM kept"),
	                 "7");
	snprintf(log, sizeof(log), "%s/pg/server.log", home);
	FILE *f = fopen(log, "r");
	cr_assert_not_null(f, "%s", log);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n]   = '\0';
	fclose(f);
	cr_assert_not_null(strstr(buf, "not properly shut down"),
	                   "no crash recovery in %s", log);
	cr_assert_eq(ax_pg_embed_down(e), AX_OK, "%s", ax_err_detail());
	ax_pg_embed_free(e);
}

/* A postmaster killed with SIGKILL and started again at once, before any
 * status probe reaped it: its zombie must not keep the new one from
 * starting (axctl standalone's supervisor restarts PostgreSQL this way). */
Test(pg_embed, up_right_after_a_killed_postmaster_starts_a_new_one)
{
	char         home[128], pidfile[160], line[32] = "";
	ax_pg_embed *e = fast_embed(home, sizeof(home));

	cr_assert_eq(ax_pg_embed_up(e), AX_OK, "%s", ax_err_detail());
	snprintf(pidfile, sizeof(pidfile), "%s/postmaster.pid",
	         ax_pg_embed_datadir(e));
	FILE *f = fopen(pidfile, "r");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(line, sizeof(line), f));
	fclose(f);
	pid_t old = (pid_t) atol(line);
	cr_assert_gt(old, 0);
	cr_assert_eq(kill(old, SIGKILL), 0);
	cr_assert_eq(ax_pg_embed_up(e), AX_OK, "the new postmaster: %s",
	             ax_err_detail());
	cr_assert_str_eq(query1(ax_pg_embed_dsn(e), "SELECT 1"), "1");
	cr_assert_eq(ax_pg_embed_down(e), AX_OK, "%s", ax_err_detail());
	ax_pg_embed_free(e);
}

Test(pg_embed, dsn_is_socket_only_and_quoted)
{
	char         home[128];
	ax_pg_embed *e;
	snprintf(home, sizeof(home), "%s/it's here", home_base);
	cr_assert_eq(ax_pg_embed_new(home, NULL, &e), AX_OK);
	cr_assert(strstr(ax_pg_embed_dsn(e), "host='") != NULL);
	cr_assert(strstr(ax_pg_embed_dsn(e), "it\\'s here/pg/run'") != NULL,
	          "%s", ax_pg_embed_dsn(e));
	cr_assert(strstr(ax_pg_embed_dsn(e), "dbname=ax") != NULL);
	ax_pg_embed_free(e);
}

Test(pg_embed, relative_home_becomes_absolute)
{
	ax_pg_embed *e;
	cr_assert_eq(ax_pg_embed_new("rel/home", NULL, &e), AX_OK);
	cr_assert_eq(ax_pg_embed_home(e)[0], '/');
	cr_assert(strstr(ax_pg_embed_home(e), "/rel/home") != NULL);
	ax_pg_embed_free(e);
}

Test(pg_embed, empty_or_too_long_home_is_refused)
{
	char         home[200];
	ax_pg_embed *e = (ax_pg_embed *) 1;
	cr_assert_eq(ax_pg_embed_new("", NULL, &e), AX_EINVAL);
	cr_assert_null(e);
	memset(home, 'a', sizeof(home) - 1);
	home[0]                = '/';
	home[sizeof(home) - 1] = '\0';
	cr_assert_eq(ax_pg_embed_new(home, NULL, &e), AX_EINVAL);
	cr_assert(strstr(ax_err_detail(), "too long") != NULL, "%s",
	          ax_err_detail());
}

/* A home below a regular file cannot be created: AX_EIO naming it. */
Test(pg_embed, home_below_a_file)
{
	char         file[128], home[160];
	ax_pg_embed *e;
	snprintf(file, sizeof(file), "%s/plain", home_base);
	int fd = open(file, O_CREAT | O_WRONLY, 0644);
	cr_assert(fd >= 0);
	close(fd);
	snprintf(home, sizeof(home), "%s/home", file);
	cr_assert_eq(ax_pg_embed_new(home, NULL, &e), AX_OK);
	cr_assert_eq(ax_pg_embed_up(e), AX_EIO);
	cr_assert(strstr(ax_err_detail(), home) != NULL, "%s",
	          ax_err_detail());
	ax_pg_embed_free(e);
}

/*
 * A home nobody but its owner may enter: as a normal user mode 0500 makes
 * it unwritable; as root the home is writable but the server's user cannot
 * traverse mode 0700. Either way AX_EPERM naming the path.
 */
Test(pg_embed, home_not_writable)
{
	char         home[128];
	ax_pg_embed *e;
	snprintf(home, sizeof(home), "%s/locked", home_base);
	cr_assert_eq(mkdir(home, geteuid() == 0 ? 0700 : 0500), 0);
	cr_assert_eq(ax_pg_embed_new(home, NULL, &e), AX_OK);
	cr_assert_eq(ax_pg_embed_up(e), AX_EPERM, "%s", ax_err_detail());
	cr_assert(strstr(ax_err_detail(), home) != NULL, "%s",
	          ax_err_detail());
	ax_pg_embed_free(e);
	chmod(home, 0700);
}

Test(pg_embed, missing_pgbin)
{
	char         home[128];
	ax_pg_embed *e;
	int          running = -1;
	snprintf(home, sizeof(home), "%s/home", home_base);
	cr_assert_eq(ax_pg_embed_new(home, "/nonexistent/pgbin", &e), AX_OK);
	cr_assert_eq(ax_pg_embed_up(e), AX_ENOENT);
	cr_assert(strstr(ax_err_detail(), "/nonexistent/pgbin/") != NULL);
	cr_assert(strstr(ax_err_detail(), "AX_PGBIN") != NULL);
	cr_assert(strstr(ax_err_detail(), "postgresql-15") != NULL);
	cr_assert_eq(ax_pg_embed_status(e, &running), AX_OK);
	cr_assert_eq(running, 0);
	ax_pg_embed_free(e);
	/* The missing binaries are found before anything is written. */
	cr_assert_eq(access(home, F_OK), -1);
}

Test(pg_embed, pgbin_from_environment)
{
	ax_pg_embed *e;
	setenv("AX_PGBIN", "/from/env", 1);
	cr_assert_eq(ax_pg_embed_new("/tmp/x", NULL, &e), AX_OK);
	cr_assert_str_eq(ax_pg_embed_pgbin(e), "/from/env");
	ax_pg_embed_free(e);
	cr_assert_eq(ax_pg_embed_new("/tmp/x", "/explicit", &e), AX_OK);
	cr_assert_str_eq(ax_pg_embed_pgbin(e), "/explicit");
	ax_pg_embed_free(e);
	unsetenv("AX_PGBIN");
}

/* A server that cannot start reports the tail of server.log. */
Test(pg_embed, start_failure_shows_server_log)
{
	char         home[128], conf[200];
	ax_pg_embed *e;
	snprintf(home, sizeof(home), "%s/home", home_base);
	cr_assert_eq(ax_pg_embed_new(home, NULL, &e), AX_OK);
	ax_pg_embed_set_fast(e, 1);
	cr_assert_eq(ax_pg_embed_up(e), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_pg_embed_down(e), AX_OK);
	snprintf(conf, sizeof(conf), "%s/postgresql.conf",
	         ax_pg_embed_datadir(e));
	FILE *f = fopen(conf, "a");
	cr_assert_not_null(f);
	fputs("shared_buffers = 'lots'\n", f);
	fclose(f);
	cr_assert_eq(ax_pg_embed_up(e), AX_EDBCONN);
	cr_assert(strstr(ax_err_detail(), "server.log") != NULL, "%s",
	          ax_err_detail());
	cr_assert(strstr(ax_err_detail(), "shared_buffers") != NULL, "%s",
	          ax_err_detail());
	ax_pg_embed_free(e);
}

Test(pg_embed, harness_clusters_are_separate)
{
	ax_test_pg *a, *b;
	cr_assert_eq(ax_test_pg_start(&a), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_test_pg_start(&b), AX_OK, "%s", ax_err_detail());
	cr_assert_str_neq(ax_test_pg_dsn(a), ax_test_pg_dsn(b));
	PGconn *c = PQconnectdb(ax_test_pg_dsn(a));
	cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s", PQerrorMessage(c));
	PQclear(PQexec(c, "CREATE TABLE only_in_a (v int)"));
	PQfinish(c);
	cr_assert_str_eq(query1(ax_test_pg_dsn(b),
	                        "SELECT count(*) FROM pg_class WHERE relname "
	                        "= 'only_in_a'"),
	                 "0");
	char home[64];
	snprintf(home, sizeof(home), "%s", ax_test_pg_home(a));
	ax_test_pg_stop(a);
	cr_assert_eq(access(home, F_OK), -1, "%s not removed", home);
	/* b is unaffected by a's stop. */
	cr_assert_str_eq(query1(ax_test_pg_dsn(b), "SELECT 1"), "1");
	ax_test_pg_stop(b);
}
