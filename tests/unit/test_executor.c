/*
 * test_executor.c - the worker's executors: local (bash) and noop.
 *
 * Each test runs real processes under a fresh temporary directory and
 * drives the executor the way ax-worker's loop does: poll(2) on
 * ax_exec_fd() with a timeout from ax_exec_next_deadline(), then
 * ax_exec_poll().
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "executor.h"
#include "proc_watch.h"
#include "task_records.h"
#include "task_user.h"

static char     tmpdir[64];
static ax_exec *ex;

static void
setup_local(void)
{
	strcpy(tmpdir, "/tmp/ax-exec-test-XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
	cr_assert_eq(ax_exec_new(&ax_exec_local_ops, &ex), AX_OK, "%s",
	             ax_err_detail());
}

static void
teardown(void)
{
	char cmd[128];
	ax_exec_free(ex);
	ex = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		cr_log_warn("could not remove %s", tmpdir);
}

TestSuite(executor, .init = setup_local, .fini = teardown, .timeout = 30);

/* A spec with the usual ids and a log file under tmpdir. */
static ax_exec_spec
spec_for(const char *run_id, const char *command, char *log, size_t cap)
{
	snprintf(log, cap, "%s/logs/%s.log", tmpdir, run_id);
	return (ax_exec_spec) {
		.run_id       = run_id,
		.dag          = "demo.dag",
		.task         = "t1",
		.logical_date = "2026-01-01T00:00:00Z",
		.attempt      = 1,
		.shard_index  = 0,
		.shard_total  = 1,
		.command      = command,
		.workdir      = tmpdir,
		.log_path     = log,
	};
}

/*
 * Runs the loop until want results arrived or limit_ms passed; returns
 * how many arrived.
 */
static size_t
drain(ax_exec *e, ax_exec_result *out, size_t want, int limit_ms)
{
	size_t  got = 0;
	int64_t end = ax_clock_mono_us() + limit_ms * AX_USEC_PER_MSEC;

	while (got < want) {
		int64_t now = ax_clock_mono_us();
		if (now >= end)
			break;
		int64_t dl = ax_exec_next_deadline(e);
		int64_t to = (dl < end ? dl : end) - now;
		if (to < 0)
			to = 0;
		struct pollfd pfd = { .fd = ax_exec_fd(e), .events = POLLIN };
		poll(&pfd, 1, (int) ((to + 999) / 1000));
		size_t n = 0;
		cr_assert_eq(ax_exec_poll(e, ax_clock_mono_us(), out + got,
		                          want - got, &n),
		             AX_OK);
		got += n;
	}
	return got;
}

static char *
slurp(const char *path)
{
	static char buf[8192];
	FILE       *f = fopen(path, "r");
	size_t      n;
	if (f == NULL)
		return NULL;
	n      = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static ax_exec_result
run_one(ax_exec_spec *s, int limit_ms)
{
	ax_exec_result r;
	cr_assert_eq(ax_exec_start(ex, s), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(drain(ex, &r, 1, limit_ms), 1, "attempt did not end");
	cr_assert_str_eq(r.run_id, s->run_id);
	return r;
}

Test(executor, success_sees_ax_env_in_log)
{
	char        log[256];
	int         cookie = 42;
	char *const env[] = { "FOO=first", "FOO=bar", "AX_DAG=spoofed", NULL };
	ax_exec_spec s =
	    spec_for("run-env",
	             "echo \"$AX_RUN_ID|$AX_DAG|$AX_TASK|$AX_LOGICAL_DATE|"
	             "$AX_ATTEMPT|$AX_SHARD_INDEX|$AX_SHARD_TOTAL|$FOO\"",
	             log, sizeof(log));
	s.attempt      = 2;
	s.shard_index  = 1;
	s.shard_total  = 3;
	s.env          = env;
	s.user         = &cookie;
	int64_t before = ax_clock_utc_us();

	ax_exec_result r = run_one(&s, 5000);
	cr_assert_eq(r.status, AX_EXEC_SUCCESS);
	cr_assert_eq(r.exit_code, 0);
	cr_assert_eq(r.term_signal, 0);
	cr_assert_eq(r.user, &cookie);
	cr_assert_gt(r.pid, 0);
	cr_assert_geq(r.started_at, before);
	cr_assert_geq(r.ended_at, r.started_at);
	cr_assert_leq(r.ended_at, ax_clock_utc_us());
	cr_assert_str_eq(slurp(log),
	                 "run-env|demo.dag|t1|"
	                 "2026-01-01T00:00:00Z|2|1|3|bar\n");
	cr_assert_eq(r.log_bytes, (int64_t) strlen(slurp(log)));
	cr_assert_gt(r.max_rss_kb, 0);
	cr_assert_eq(ax_exec_running(ex), 0);
}

Test(executor, cpu_time_is_reported)
{
	char           log[256];
	ax_exec_spec   s = spec_for("run-cpu",
	                            "i=0; while [ $i -lt 200000 ]; do "
	                              "i=$((i+1)); done",
	                            log, sizeof(log));
	ax_exec_result r = run_one(&s, 20000);
	cr_assert_eq(r.status, AX_EXEC_SUCCESS);
	cr_assert_gt(r.cpu_user_us + r.cpu_sys_us, 10000, "%lld",
	             (long long) r.cpu_user_us);
	cr_assert_eq(r.log_bytes, 0);
}

Test(executor, nonzero_exit_is_failed)
{
	char           log[256];
	ax_exec_spec   s = spec_for("run-exit3", "exit 3", log, sizeof(log));
	ax_exec_result r = run_one(&s, 5000);
	cr_assert_eq(r.status, AX_EXEC_FAILED);
	cr_assert_eq(r.exit_code, 3);
	cr_assert_eq(r.term_signal, 0);
}

Test(executor, signal_death_is_reported)
{
	char         log[256];
	ax_exec_spec s =
	    spec_for("run-sig", "kill -USR1 $$", log, sizeof(log));
	ax_exec_result r = run_one(&s, 5000);
	cr_assert_eq(r.status, AX_EXEC_FAILED);
	cr_assert_eq(r.exit_code, -1);
	cr_assert_eq(r.term_signal, SIGUSR1);
}

Test(executor, timeout_kills_the_whole_group)
{
	char         log[256];
	ax_exec_spec s  = spec_for("run-to", "sleep 100 & sleep 100 & wait",
	                           log, sizeof(log));
	s.timeout_us    = 200 * AX_USEC_PER_MSEC;
	s.grace_us      = 5 * AX_USEC_PER_SEC;
	int64_t t0      = ax_clock_mono_us();
	int64_t started = 0;
	s.started_at    = &started;

	ax_exec_result r    = run_one(&s, 5000);
	int64_t        took = ax_clock_mono_us() - t0;
	cr_assert_eq(r.status, AX_EXEC_TIMEOUT);
	cr_assert_eq(r.term_signal, SIGTERM);
	/* the start time given back at start is the one the timeout counts
	 * from: the recorded run is never shorter than the timeout */
	cr_assert_eq(started, r.started_at);
	cr_assert_geq(r.ended_at - r.started_at, s.timeout_us, "ran %lld us",
	              (long long) (r.ended_at - r.started_at));
	cr_assert_geq(took, 200 * AX_USEC_PER_MSEC);
	/* the sleeps die of SIGTERM: no need to wait for the grace */
	cr_assert_lt(took, 2 * AX_USEC_PER_SEC, "took %lld us",
	             (long long) took);
	cr_assert_eq(kill(-r.pid, 0), -1, "process group %d survived", r.pid);
	cr_assert_eq(errno, ESRCH);
	cr_assert_not_null(strstr(slurp(log), "ax: timeout"));
}

Test(executor, timeout_sigkills_a_group_that_ignores_sigterm)
{
	char         log[256];
	ax_exec_spec s =
	    spec_for("run-to9", "trap '' TERM; sleep 100 & sleep 100 & wait",
	             log, sizeof(log));
	/* long enough for the shell to set its trap on a loaded machine
	 * (a sanitizer build beside other suites): the TERM must find it */
	s.timeout_us = 1000 * AX_USEC_PER_MSEC;
	s.grace_us   = 300 * AX_USEC_PER_MSEC;
	int64_t t0   = ax_clock_mono_us();

	ax_exec_result r    = run_one(&s, 6000);
	int64_t        took = ax_clock_mono_us() - t0;
	cr_assert_eq(r.status, AX_EXEC_TIMEOUT);
	cr_assert_eq(r.term_signal, SIGKILL);
	cr_assert_geq(took, 1300 * AX_USEC_PER_MSEC);
	cr_assert_eq(kill(-r.pid, 0), -1, "process group %d survived", r.pid);
	cr_assert_eq(errno, ESRCH);
}

Test(executor, leftovers_of_a_finished_task_are_killed)
{
	char         log[256];
	ax_exec_spec s =
	    spec_for("run-left", "sleep 100 & exit 0", log, sizeof(log));
	ax_exec_result r = run_one(&s, 5000);
	cr_assert_eq(r.status, AX_EXEC_SUCCESS);
	cr_assert_eq(kill(-r.pid, 0), -1, "process group %d survived", r.pid);
	cr_assert_eq(errno, ESRCH);
}

Test(executor, kill_request)
{
	char           log[256];
	ax_exec_spec   s = spec_for("run-kill", "sleep 100", log, sizeof(log));
	ax_exec_result r;

	cr_assert_eq(ax_exec_start(ex, &s), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_exec_running(ex), 1);
	cr_assert_eq(ax_exec_kill(ex, "no-such-run", 0), AX_ENOENT);
	cr_assert_eq(ax_exec_kill(ex, "run-kill", 0), AX_OK);
	cr_assert_eq(ax_exec_kill(ex, "run-kill", 0), AX_OK); /* idempotent */
	cr_assert_eq(drain(ex, &r, 1, 5000), 1);
	cr_assert_eq(r.status, AX_EXEC_KILLED);
	cr_assert_eq(r.term_signal, SIGTERM);
	cr_assert_eq(kill(-r.pid, 0), -1);
	cr_assert_eq(ax_exec_kill(ex, "run-kill", 0), AX_ENOENT);
	cr_assert_not_null(strstr(slurp(log), "ax: kill requested"));
}

/* A preemption's kill brings its own grace (preemption.grace): a task
 * that ignores SIGTERM is SIGKILLed after that, not after its own. */
Test(executor, kill_with_its_own_grace_overrides_the_task_grace)
{
	char           log[256], cmd[512], mark[300];
	ax_exec_result r;

	/* the mark says the trap is set: a fixed sleep was too short for a
	 * shell started on a loaded machine (the TERM ended it) */
	snprintf(mark, sizeof(mark), "%s/trap-set", tmpdir);
	snprintf(cmd, sizeof(cmd), "trap '' TERM; echo > %s; sleep 100 & wait",
	         mark);
	ax_exec_spec s = spec_for("run-kg", cmd, log, sizeof(log));
	s.grace_us     = 60 * AX_USEC_PER_SEC;
	cr_assert_eq(ax_exec_start(ex, &s), AX_OK, "%s", ax_err_detail());
	for (int i = 0; i < 300 && access(mark, F_OK) != 0; i++)
		ax_clock_sleep_us(50 * AX_USEC_PER_MSEC);
	cr_assert_eq(access(mark, F_OK), 0, "the trap was not set in 15 s");
	int64_t t0 = ax_clock_mono_us();
	cr_assert_eq(ax_exec_kill(ex, "run-kg", 300 * AX_USEC_PER_MSEC),
	             AX_OK);
	/* a second request does not restart or lengthen it */
	cr_assert_eq(ax_exec_kill(ex, "run-kg", 50 * AX_USEC_PER_SEC), AX_OK);
	cr_assert_eq(drain(ex, &r, 1, 5000), 1, "still running after 5 s");
	int64_t took = ax_clock_mono_us() - t0;
	cr_assert_eq(r.status, AX_EXEC_KILLED);
	cr_assert_eq(r.term_signal, SIGKILL);
	cr_assert_geq(took, 250 * AX_USEC_PER_MSEC);
	cr_assert_lt(took, 3 * AX_USEC_PER_SEC);
	cr_assert_eq(kill(-r.pid, 0), -1, "process group %d survived", r.pid);
}

/* Live usage of a running attempt, summed over its process group: a
 * task that burned CPU, then sleeps. */
Test(executor, usage_of_a_running_attempt)
{
	char           log[256], cmd[512], mark[300];
	ax_exec_usage  u[4];
	ax_exec_result r;
	size_t         n;

	snprintf(mark, sizeof(mark), "%s/busy-done", tmpdir);
	snprintf(cmd, sizeof(cmd),
	         "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; "
	         "echo > %s; sleep 30",
	         mark);
	ax_exec_spec s = spec_for("run-use", cmd, log, sizeof(log));
	cr_assert_eq(ax_exec_start(ex, &s), AX_OK, "%s", ax_err_detail());
	for (int i = 0; i < 300 && access(mark, F_OK) != 0; i++)
		ax_clock_sleep_us(50 * AX_USEC_PER_MSEC);
	cr_assert_eq(access(mark, F_OK), 0, "the loop did not end in 15 s");
	n = ax_exec_usage_now(ex, u, 4);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(u[0].run_id, "run-use");
	cr_assert_geq(u[0].cpu_us, 100 * AX_USEC_PER_MSEC, "cpu %lld us",
	              (long long) u[0].cpu_us);
	cr_assert_gt(u[0].rss_kb, 100, "rss %lld kB", (long long) u[0].rss_kb);
	cr_assert_eq(ax_exec_usage_now(ex, u, 0), 0);
	cr_assert_eq(ax_exec_kill(ex, "run-use", 0), AX_OK);
	cr_assert_eq(drain(ex, &r, 1, 5000), 1);
	cr_assert_eq(ax_exec_usage_now(ex, u, 4), 0, "ended: nothing used");
}

Test(executor, missing_command_exits_127)
{
	char         log[256];
	ax_exec_spec s =
	    spec_for("run-127", "no_such_command_ax_xyz", log, sizeof(log));
	ax_exec_result r = run_one(&s, 5000);
	cr_assert_eq(r.status, AX_EXEC_FAILED);
	cr_assert_eq(r.exit_code, 127);
	cr_assert_not_null(strstr(slurp(log), "command not found"));
}

Test(executor, missing_argv_program_fails_to_start)
{
	char         log[256];
	char *const  argv[] = { "no_such_program_ax_xyz", NULL };
	ax_exec_spec s      = spec_for("run-noprog", NULL, log, sizeof(log));
	s.argv              = argv;
	cr_assert_eq(ax_exec_start(ex, &s), AX_ENOENT);
	cr_assert_not_null(strstr(ax_err_detail(), "no_such_program_ax_xyz"));
	cr_assert_not_null(strstr(slurp(log), "ax: cannot start"));
	cr_assert_eq(ax_exec_running(ex), 0);
}

Test(executor, argv_runs_without_a_shell)
{
	char         log[256];
	char *const  argv[] = { "printf", "%s-%s", "$HOME", "x y", NULL };
	ax_exec_spec s      = spec_for("run-argv", NULL, log, sizeof(log));
	s.argv              = argv;
	ax_exec_result r    = run_one(&s, 5000);
	cr_assert_eq(r.status, AX_EXEC_SUCCESS);
	cr_assert_str_eq(slurp(log), "$HOME-x y");
}

Test(executor, log_gets_stdout_and_stderr_appended)
{
	char         log[256];
	ax_exec_spec s =
	    spec_for("run-log", "echo out; echo err >&2", log, sizeof(log));
	cr_assert_eq(run_one(&s, 5000).status, AX_EXEC_SUCCESS);
	s.run_id = "run-log-2"; /* a second attempt appends to the same file */
	s.command = "echo again";
	cr_assert_eq(run_one(&s, 5000).status, AX_EXEC_SUCCESS);
	cr_assert_str_eq(slurp(log), "out\nerr\nagain\n");
}

Test(executor, rlimits_are_applied)
{
	char         log[256];
	ax_exec_spec s         = spec_for("run-ulimit",
	                                  "ulimit -n; ulimit -t; "
	                                          "ulimit -v; ulimit -f",
	                                  log, sizeof(log));
	s.limits.open_files    = 77;
	s.limits.cpu_seconds   = 30;
	s.limits.address_space = 1024LL * 1024 * 1024;
	s.limits.file_size     = 1024LL * 1024;
	ax_exec_result r       = run_one(&s, 5000);
	cr_assert_eq(r.status, AX_EXEC_SUCCESS);
	/* ulimit -v and -f print KiB (bash: -f in 1024-byte blocks) */
	cr_assert_str_eq(slurp(log), "77\n30\n1048576\n1024\n");
}

Test(executor, rlimit_above_hard_limit_fails_to_start)
{
	char         log[256];
	ax_exec_spec s = spec_for("run-rl", "true", log, sizeof(log));
	/* above fs.nr_open: refused even for root */
	s.limits.open_files = 1LL << 40;
	ax_err rv           = ax_exec_start(ex, &s);
	cr_assert(rv == AX_EPERM || rv == AX_EIO, "got %s", ax_errname(rv));
	cr_assert_not_null(strstr(ax_err_detail(), "RLIMIT_NOFILE"), "%s",
	                   ax_err_detail());
	cr_assert_eq(ax_exec_running(ex), 0);
}

Test(executor, stdin_is_dev_null_and_no_fd_leaks)
{
	char         log[256];
	int          leak = open("/dev/null", O_RDONLY); /* no CLOEXEC */
	ax_exec_spec s    = spec_for("run-fds",
	                             "cat; ls /proc/self/fd | sort -n | tr "
	                                "'\\n' ' '",
	                             log, sizeof(log));
	cr_assert_geq(leak, 3);
	ax_exec_result r = run_one(&s, 5000);
	cr_assert_eq(r.status, AX_EXEC_SUCCESS);
	/* 0 1 2, and 3 is the directory ls itself is reading */
	cr_assert_str_eq(slurp(log), "0 1 2 3 ");
	close(leak);
}

Test(executor, workdir_is_used_and_a_missing_one_fails)
{
	char         log[256];
	char         dir[128];
	char         want[160];
	ax_exec_spec s = spec_for("run-pwd", "pwd", log, sizeof(log));
	snprintf(dir, sizeof(dir), "%s/wd", tmpdir);
	cr_assert_eq(mkdir(dir, 0755), 0);
	s.workdir = dir;
	cr_assert_eq(run_one(&s, 5000).status, AX_EXEC_SUCCESS);
	snprintf(want, sizeof(want), "%s\n", dir);
	cr_assert_str_eq(slurp(log), want);

	s.run_id  = "run-nowd";
	s.workdir = "/nonexistent/ax/dir";
	cr_assert_eq(ax_exec_start(ex, &s), AX_ENOENT);
	cr_assert_not_null(strstr(ax_err_detail(), "/nonexistent/ax/dir"));
	cr_assert_eq(ax_exec_running(ex), 0);
}

Test(executor, many_concurrent_attempts_are_all_reaped)
{
	enum { N = 50 };
	char           ids[N][16];
	ax_exec_result r[N];
	int            seen[N] = { 0 };

	for (int i = 0; i < N; i++) {
		snprintf(ids[i], sizeof(ids[i]), "many-%d", i);
		ax_exec_spec s = {
			.run_id  = ids[i],
			.attempt = 1,
			.command = "true",
		};
		cr_assert_eq(ax_exec_start(ex, &s), AX_OK, "%s",
		             ax_err_detail());
	}
	/* a small out array: results beyond it wait for the next poll */
	size_t  got = 0;
	int64_t end = ax_clock_mono_us() + 10 * AX_USEC_PER_SEC;
	while (got < N && ax_clock_mono_us() < end)
		got += drain(ex, r + got, got + 7 < N ? 7 : N - got, 10000);
	cr_assert_eq(got, N);
	for (int i = 0; i < N; i++) {
		int k;
		cr_assert_eq(sscanf(r[i].run_id, "many-%d", &k), 1);
		cr_assert_eq(seen[k]++, 0, "%s returned twice", r[i].run_id);
		cr_assert_eq(r[i].status, AX_EXEC_SUCCESS);
	}
	cr_assert_eq(ax_exec_running(ex), 0);
	cr_assert_eq(ax_exec_next_deadline(ex), INT64_MAX);
	cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1, "a child was left");
	cr_assert_eq(errno, ECHILD);
}

Test(executor, deadline_follows_the_timeout)
{
	char         log[256];
	ax_exec_spec s = spec_for("run-dl", "sleep 100", log, sizeof(log));
	cr_assert_eq(ax_exec_next_deadline(ex), INT64_MAX);
	s.timeout_us = 30 * AX_USEC_PER_SEC;
	int64_t t0   = ax_clock_mono_us();
	cr_assert_eq(ax_exec_start(ex, &s), AX_OK, "%s", ax_err_detail());
	int64_t dl = ax_exec_next_deadline(ex);
	cr_assert_geq(dl, t0 + s.timeout_us);
	cr_assert_leq(dl, ax_clock_mono_us() + s.timeout_us);
	cr_assert_eq(ax_exec_start(ex, &s), AX_EEXIST);
	cr_assert_eq(ax_exec_kill(ex, "run-dl", 0), AX_OK);
	ax_exec_result r;
	cr_assert_eq(drain(ex, &r, 1, 5000), 1);
	cr_assert_eq(r.status, AX_EXEC_KILLED);
}

/* Bad specs: each is refused with AX_EINVAL and a detail naming it. */
struct bad_case {
	char name[32];
	char detail[48]; /* expected in ax_err_detail() */
};

ParameterizedTestParameters(executor, bad_spec_is_refused)
{
	static struct bad_case cases[] = {
		{ "empty_run_id", "run_id is empty" },
		{ "long_run_id", "run_id is" },
		{ "no_command", "exactly one of command and argv" },
		{ "both", "exactly one of command and argv" },
		{ "empty_argv", "argv[0] is empty" },
		{ "attempt0", "attempt number 0" },
		{ "shard", "shard 3 of 3" },
		{ "neg_timeout", "negative timeout" },
		{ "neg_limit", "negative rlimit" },
		{ "bad_env", "env[0] \"NOEQUALS\"" },
	};
	return cr_make_param_array(struct bad_case, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct bad_case *c, executor, bad_spec_is_refused)
{
	char         longid[200];
	char *const  argv[]  = { "true", NULL };
	char *const  eargv[] = { "", NULL };
	char *const  env[]   = { "NOEQUALS", NULL };
	ax_exec_spec s = { .run_id = "bad", .attempt = 1, .command = "true" };

	memset(longid, 'x', sizeof(longid) - 1);
	longid[sizeof(longid) - 1] = '\0';
	if (strcmp(c->name, "empty_run_id") == 0)
		s.run_id = "";
	else if (strcmp(c->name, "long_run_id") == 0)
		s.run_id = longid;
	else if (strcmp(c->name, "no_command") == 0)
		s.command = NULL;
	else if (strcmp(c->name, "both") == 0)
		s.argv = argv;
	else if (strcmp(c->name, "empty_argv") == 0) {
		s.command = NULL;
		s.argv    = eargv;
	} else if (strcmp(c->name, "attempt0") == 0)
		s.attempt = 0;
	else if (strcmp(c->name, "shard") == 0) {
		s.shard_index = 3;
		s.shard_total = 3;
	} else if (strcmp(c->name, "neg_timeout") == 0)
		s.timeout_us = -1;
	else if (strcmp(c->name, "neg_limit") == 0)
		s.limits.open_files = -5;
	else if (strcmp(c->name, "bad_env") == 0)
		s.env = env;
	cr_assert_eq(ax_exec_start(ex, &s), AX_EINVAL, "%s", c->name);
	cr_assert_not_null(strstr(ax_err_detail(), c->detail), "%s: '%s'",
	                   c->name, ax_err_detail());
	cr_assert_eq(ax_exec_running(ex), 0);
}

Test(executor, free_kills_running_attempts)
{
	char         log[256];
	ax_exec_spec s =
	    spec_for("run-free", "sleep 100 & sleep 100", log, sizeof(log));
	cr_assert_eq(ax_exec_start(ex, &s), AX_OK, "%s", ax_err_detail());
	ax_exec_free(ex);
	ex = NULL;
	cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1, "a child was left");
}

Test(executor, ops_lookup_and_resource_mapping)
{
	ax_exec_limits l = { .open_files = 9 };
	cr_assert_eq(ax_exec_ops_find("bash"), &ax_exec_local_ops);
	cr_assert_eq(ax_exec_ops_find("noop"), &ax_exec_noop_ops);
	cr_assert_null(ax_exec_ops_find("sql"));
	cr_assert_null(ax_exec_ops_find(NULL));
	cr_assert_eq(ax_exec_ops_of(ex), &ax_exec_local_ops);

	ax_exec_limits_from_resources(0.5, 512LL << 20, 10 * AX_USEC_PER_SEC,
	                              &l);
	cr_assert_eq(l.cpu_seconds, 5);
	cr_assert_eq(l.address_space, 512LL << 20);
	cr_assert_eq(l.open_files, 9); /* untouched */
	ax_exec_limits_from_resources(2, 0, 0, &l);
	cr_assert_eq(l.cpu_seconds, 0); /* no timeout: no CPU budget */
	cr_assert_eq(l.address_space, 0);
	ax_exec_limits_from_resources(0.001, 0, AX_USEC_PER_SEC, &l);
	cr_assert_eq(l.cpu_seconds, 1);
	cr_assert_str_eq(ax_exec_status_name(AX_EXEC_TIMEOUT), "TIMEOUT");
}

/* ---- supervision: worker death, lease, leftovers ---- */

/* Reads up to n pids (one a line) from path once it exists. */
static int
read_pids(const char *path, pid_t *pids, int n, int limit_ms)
{
	int64_t end = ax_clock_mono_us() + limit_ms * AX_USEC_PER_MSEC;
	FILE   *f;
	int     got = 0;

	while ((f = fopen(path, "r")) == NULL) {
		cr_assert_lt(ax_clock_mono_us(), end, "%s never appeared",
		             path);
		ax_clock_sleep_us(10 * AX_USEC_PER_MSEC);
	}
	while (got < n && fscanf(f, "%d", &pids[got]) == 1)
		got++;
	fclose(f);
	return got;
}

/* A task that writes "main child grandchild" pids to pids_path (the
 * grandchild is double-forked out of bash's job control) and sleeps. */
#define SPAWNER                                                               \
	"(sleep 100 & echo $! > \"$PIDS.gc\"); sleep 100 & "                  \
	"sleep 0.05; echo $$ $! $(cat \"$PIDS.gc\") > \"$PIDS.tmp\"; "        \
	"mv \"$PIDS.tmp\" \"$PIDS\"; wait"

/*
 * Forks a stand-in worker: a process that runs one attempt with the
 * local executor (records in state_dir unless NULL) and loops as
 * ax-worker does, forever. Returns its pid.
 */
static pid_t
fork_worker_cmd(const char *run_id, const char *cmd, const char *pids_path,
                const char *state_dir, int cgroups)
{
	pid_t w = fork();
	cr_assert_geq(w, 0);
	if (w == 0) {
		ax_exec       *e;
		ax_exec_result r;
		char           log[256], env[300];
		char          *envv[] = { env, NULL };
		size_t         n;

		ax_exec_free(ex); /* the test's, inherited: not ours */
		ex = NULL;
		if (ax_exec_new(&ax_exec_local_ops, &e) != AX_OK)
			_exit(3);
		if (state_dir != NULL &&
		    ax_exec_set_state_dir(e, state_dir) != AX_OK)
			_exit(4);
		snprintf(env, sizeof(env), "PIDS=%s", pids_path);
		if (cgroups && ax_exec_use_cgroups(e) != AX_OK)
			_exit(6);
		ax_exec_spec s = spec_for(run_id, cmd, log, sizeof(log));
		s.env          = envv;
		if (ax_exec_start(e, &s) != AX_OK)
			_exit(5);
		for (;;) {
			struct pollfd pfd = { .fd     = ax_exec_fd(e),
				              .events = POLLIN };
			poll(&pfd, 1, 100);
			ax_exec_poll(e, ax_clock_mono_us(), &r, 1, &n);
		}
	}
	return w;
}

static pid_t
fork_worker(const char *run_id, const char *pids_path, const char *state_dir)
{
	return fork_worker_cmd(run_id, SPAWNER, pids_path, state_dir, 0);
}

/* A task with a process that leaves its group and session: writes
 * "main escapee" pids to $PIDS. */
#define ESCAPER                                                               \
	"setsid sleep 100 & sleep 0.05; echo $$ $! > \"$PIDS.tmp\"; "         \
	"mv \"$PIDS.tmp\" \"$PIDS\"; sleep 100"

/* Skips the test where this process cannot give tasks cgroups. */
static void
need_cgroups(void)
{
	if (ax_exec_use_cgroups(ex) != AX_OK)
		cr_skip_test("no usable cgroup v2 here: %s", ax_err_detail());
}

/* The cgroup v2 path of pid ("" if none). */
static const char *
cgroup_of(pid_t pid, char *buf, size_t len)
{
	char  path[64], line[512];
	FILE *f;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int) pid);
	if ((f = fopen(path, "r")) == NULL)
		return buf;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "0::", 3) == 0)
			snprintf(buf, len, "%.*s",
			         (int) strcspn(line + 3, "\n"), line + 3);
	fclose(f);
	return buf;
}

/* The directory of cgroup path cg (as /proc/PID/cgroup shows it). */
static const char *
cgroup_dir(const char *cg, char *buf, size_t len)
{
	if (access("/sys/fs/cgroup/unified/cgroup.procs", F_OK) == 0)
		snprintf(buf, len, "/sys/fs/cgroup/unified%s", cg);
	else
		snprintf(buf, len, "/sys/fs/cgroup%s", cg);
	return buf;
}

Test(executor, cgroup_takes_an_escaped_process_along_with_a_killed_worker)
{
	char    pids_path[128], cg[256], dir[300];
	pid_t   p[2];
	int64_t took;

	need_cgroups();
	snprintf(pids_path, sizeof(pids_path), "%s/pids", tmpdir);
	pid_t w = fork_worker_cmd("run-esc", ESCAPER, pids_path, NULL, 1);
	cr_assert_eq(read_pids(pids_path, p, 2, 5000), 2);
	cr_assert(strstr(cgroup_of(p[1], cg, sizeof(cg)), "/ax-") != NULL,
	          "the escapee is in cgroup '%s'", cg);
	kill(w, SIGKILL);
	cr_assert_eq(waitpid(w, NULL, 0), w);
	took = ax_test_wait_gone(p, 2, 1000);
	ax_test_kill_all(p, 2);
	cr_assert_geq(took, 0, "pids %d %d outlived their worker", p[0], p[1]);
	/* the shim removed the emptied cgroup: the worker could not */
	cgroup_dir(cg, dir, sizeof(dir));
	for (int i = 0; i < 100 && access(dir, F_OK) == 0; i++)
		ax_clock_sleep_us(10 * AX_USEC_PER_MSEC);
	cr_assert_eq(access(dir, F_OK), -1, "cgroup %s was left", dir);
}

Test(executor, cgroup_kills_an_escaped_process_when_the_attempt_ends)
{
	char           log[256], env[160], pids_path[128], cg[256], dir[300];
	char          *envv[] = { env, NULL };
	pid_t          p[2];
	ax_exec_result r;

	need_cgroups();
	snprintf(pids_path, sizeof(pids_path), "%s/pids", tmpdir);
	snprintf(env, sizeof(env), "PIDS=%s", pids_path);
	ax_exec_spec s = spec_for("run-esc-end",
	                          "setsid sleep 100 & sleep 0.05; "
	                          "echo $$ $! > $PIDS; exit 0",
	                          log, sizeof(log));
	s.env          = envv;
	cr_assert_eq(ax_exec_start(ex, &s), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(read_pids(pids_path, p, 2, 5000), 2);
	cgroup_of(p[1], cg, sizeof(cg));
	cr_assert_eq(drain(ex, &r, 1, 5000), 1);
	cr_assert_eq(r.status, AX_EXEC_SUCCESS);
	cr_assert_geq(ax_test_wait_gone(&p[1], 1, 1000), 0,
	              "the setsid process %d survived its attempt", p[1]);
	/* and the attempt's cgroup is gone */
	cr_assert(strstr(cg, "/ax-") != NULL, "cgroup '%s'", cg);
	cgroup_dir(cg, dir, sizeof(dir));
	cr_assert_eq(access(dir, F_OK), -1, "%s was left", dir);
}

Test(executor, leftovers_in_a_cgroup_are_killed_whole)
{
	char  pa[128], state[128], cg[256], dir[300];
	pid_t a[2], sa;
	int   killed = -1;

	need_cgroups();
	snprintf(pa, sizeof(pa), "%s/pa", tmpdir);
	snprintf(state, sizeof(state), "%s/state", tmpdir);
	pid_t wa = fork_worker_cmd("run-cg-left", ESCAPER, pa, state, 1);
	cr_assert_eq(read_pids(pa, a, 2, 5000), 2);
	sa = ax_test_ppid(a[0]);
	cgroup_dir(cgroup_of(a[1], cg, sizeof(cg)), dir, sizeof(dir));
	kill(wa, SIGSTOP);
	kill(sa, SIGKILL);
	kill(wa, SIGKILL);
	waitpid(wa, NULL, 0);
	ax_clock_sleep_us(200 * AX_USEC_PER_MSEC);
	cr_assert(ax_test_alive(a[0]) && ax_test_alive(a[1]));
	cr_assert_eq(ax_task_records_kill_leftovers(state, &killed), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_eq(killed, 1);
	cr_assert_geq(ax_test_wait_gone(a, 2, 1000), 0,
	              "leftovers (the escaped one too) survived");
	cr_assert_eq(access(dir, F_OK), -1, "cgroup %s was left", dir);
}

Test(executor, task_and_grandchildren_die_with_a_killed_worker)
{
	char    pids_path[128];
	pid_t   p[3];
	int64_t took;

	snprintf(pids_path, sizeof(pids_path), "%s/pids", tmpdir);
	pid_t w = fork_worker("run-orphan", pids_path, NULL);
	cr_assert_eq(read_pids(pids_path, p, 3, 5000), 3);
	for (int i = 0; i < 3; i++)
		cr_assert(ax_test_alive(p[i]), "pid %d is not running", p[i]);
	kill(w, SIGKILL);
	cr_assert_eq(waitpid(w, NULL, 0), w);
	took = ax_test_wait_gone(p, 3, 1000);
	ax_test_kill_all(p, 3);
	cr_assert_geq(took, 0,
	              "task processes %d %d %d outlived their worker by "
	              "more than 1 s",
	              p[0], p[1], p[2]);
	cr_log_info("task gone %lld us after kill -9 of its worker",
	            (long long) took);
}

Test(executor, lapsed_lease_kills_the_group_while_the_worker_sleeps)
{
	char           pids_path[128], log[256], env[160];
	char          *envv[] = { env, NULL };
	pid_t          p[3];
	ax_exec_result r;
	int64_t        lease, took;

	snprintf(pids_path, sizeof(pids_path), "%s/pids", tmpdir);
	snprintf(env, sizeof(env), "PIDS=%s", pids_path);
	ax_exec_spec s = spec_for("run-lease", SPAWNER, log, sizeof(log));
	s.env          = envv;
	ax_exec_set_lease(ex, ax_clock_mono_us() + 60 * AX_USEC_PER_SEC);
	cr_assert_eq(ax_exec_start(ex, &s), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(read_pids(pids_path, p, 3, 5000), 3);
	/* a renewal reaches the running shim, then no more: the worker
	 * is "stopped" (this thread never polls the executor meanwhile) */
	lease = ax_clock_mono_us() + 400 * AX_USEC_PER_MSEC;
	ax_exec_set_lease(ex, lease);
	ax_clock_sleep_us(200 * AX_USEC_PER_MSEC);
	for (int i = 0; i < 3; i++)
		cr_assert(ax_test_alive(p[i]),
		          "pid %d died before the lease lapsed", p[i]);
	took = ax_test_wait_gone(p, 3, 2000);
	cr_assert_geq(took, 0, "the group outlived the lease by 2 s");
	cr_assert_geq(ax_clock_mono_us(), lease);
	/* the worker wakes up: the result says it was fenced */
	ax_exec_fence(ex, lease);
	cr_assert_eq(drain(ex, &r, 1, 5000), 1);
	cr_assert_eq(r.status, AX_EXEC_FENCED, "status %s",
	             ax_exec_status_name(r.status));
	cr_assert_eq(r.term_signal, SIGKILL);
	cr_assert_not_null(
	    strstr(slurp(log), "ax: the worker's lease lapsed"));
}

Test(executor, fence_kills_running_attempts_and_keeps_finished_ones)
{
	char           la[256], lb[256];
	ax_exec_result r[2];
	ax_exec_spec   a = spec_for("run-fa", "sleep 100", la, sizeof(la));
	ax_exec_spec   b = spec_for("run-fb", "exit 3", lb, sizeof(lb));

	cr_assert_eq(ax_exec_start(ex, &a), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_exec_start(ex, &b), AX_OK, "%s", ax_err_detail());
	ax_clock_sleep_us(300 * AX_USEC_PER_MSEC); /* b ends, unpolled */
	int64_t t0 = ax_clock_mono_us();
	ax_exec_fence(ex, t0);
	cr_assert_eq(drain(ex, r, 2, 5000), 2);
	cr_assert_lt(ax_clock_mono_us() - t0, 2 * AX_USEC_PER_SEC,
	             "a fence does not wait for a grace period");
	for (int i = 0; i < 2; i++) {
		if (strcmp(r[i].run_id, "run-fa") == 0) {
			cr_assert_eq(r[i].status, AX_EXEC_FENCED);
			cr_assert_eq(r[i].term_signal, SIGKILL);
		} else {
			cr_assert_eq(r[i].status, AX_EXEC_FAILED);
			cr_assert_eq(r[i].exit_code, 3);
		}
	}
	cr_assert_str_eq(ax_exec_status_name(AX_EXEC_FENCED), "FENCED");
}

Test(executor, leftovers_of_an_earlier_life_are_killed_from_records)
{
	char    pa[128], pb[128], state[128], cmd[300];
	pid_t   a[3], b[3], all[5];
	int     killed = -1;
	int64_t took;

	snprintf(pa, sizeof(pa), "%s/pa", tmpdir);
	snprintf(pb, sizeof(pb), "%s/pb", tmpdir);
	snprintf(state, sizeof(state), "%s/state", tmpdir);
	pid_t wa = fork_worker("run-left-a", pa, state);
	pid_t wb = fork_worker("run-left-b", pb, state);
	cr_assert_eq(read_pids(pa, a, 3, 5000), 3);
	cr_assert_eq(read_pids(pb, b, 3, 5000), 3);
	/* The worker dies with its shims (as when a whole service cgroup
	 * is killed): stop the worker so it cannot see its shim die, kill
	 * the shim, then the worker. */
	pid_t sa = ax_test_ppid(a[0]), sb = ax_test_ppid(b[0]);
	kill(wa, SIGSTOP);
	kill(wb, SIGSTOP);
	kill(sa, SIGKILL);
	kill(sb, SIGKILL);
	kill(wa, SIGKILL);
	kill(wb, SIGKILL);
	waitpid(wa, NULL, 0);
	waitpid(wb, NULL, 0);
	/* b's leader dies too: only its members remain */
	kill(b[0], SIGKILL);
	ax_clock_sleep_us(200 * AX_USEC_PER_MSEC);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	for (int i = 0; i < 3; i++)
		cr_assert(ax_test_alive(a[i]), "%d died with its worker",
		          a[i]);
	cr_assert(ax_test_alive(b[1]) && ax_test_alive(b[2]));
	snprintf(cmd, sizeof(cmd), "test $(ls %s/*.task | wc -l) = 2", state);
	cr_assert_eq(system(cmd), 0, "two records expected in %s", state);

	cr_assert_eq(ax_task_records_kill_leftovers(state, &killed), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_eq(killed, 2);
	all[0] = a[0];
	all[1] = a[1];
	all[2] = a[2];
	all[3] = b[1];
	all[4] = b[2];
	took   = ax_test_wait_gone(all, 5, 1000);
	cr_assert_geq(took, 0, "leftovers survived");
	snprintf(cmd, sizeof(cmd), "test -z \"$(ls %s)\"", state);
	cr_assert_eq(system(cmd), 0, "records are removed");
	cr_assert_eq(ax_task_records_kill_leftovers(state, &killed), AX_OK);
	cr_assert_eq(killed, 0);
}

Test(executor, leftover_record_of_a_reused_pid_kills_nothing)
{
	char  state[128], path[200];
	pid_t stranger = fork();
	int   killed   = -1;
	FILE *f;

	cr_assert_geq(stranger, 0);
	if (stranger == 0) {
		setpgid(0, 0);
		execl("/bin/sleep", "sleep", "100", (char *) NULL);
		_exit(127);
	}
	setpgid(stranger, stranger);
	snprintf(state, sizeof(state), "%s/state", tmpdir);
	mkdir(state, 0755);
	snprintf(path, sizeof(path), "%s/run-old.task", state);
	cr_assert_not_null(f = fopen(path, "w"));
	/* this boot, the stranger's group, but another start time */
	char  boot[64] = "";
	FILE *b        = fopen("/proc/sys/kernel/random/boot_id", "r");
	cr_assert_not_null(b);
	cr_assert_eq(fscanf(b, "%63s", boot), 1);
	fclose(b);
	fprintf(f, "ax-task 1\nboot %s\npgid %d\nstart 1\nrun_id run-old\n",
	        boot, (int) stranger);
	fclose(f);
	ax_clock_sleep_us(50 * AX_USEC_PER_MSEC);
	cr_assert_eq(ax_task_records_kill_leftovers(state, &killed), AX_OK);
	cr_assert_eq(killed, 0);
	cr_assert(ax_test_alive(stranger),
	          "an unrelated process group was killed");
	kill(stranger, SIGKILL);
	waitpid(stranger, NULL, 0);
	cr_assert_eq(access(path, F_OK), -1, "the record is removed");
}

/* ---- noop ---- */

Test(executor, noop_completes_immediately)
{
	ax_exec       *nx;
	ax_exec_result r[3];
	struct pollfd  pfd;
	size_t         n  = 0;
	int            u  = 7;
	ax_exec_spec   s  = { .run_id = "noop-1", .attempt = 1, .user = &u };
	int64_t        t0 = ax_clock_utc_us();

	cr_assert_eq(ax_exec_new(&ax_exec_noop_ops, &nx), AX_OK);
	pfd = (struct pollfd) { .fd = ax_exec_fd(nx), .events = POLLIN };
	cr_assert_eq(poll(&pfd, 1, 0), 0, "readable before any start");
	cr_assert_eq(ax_exec_start(nx, &s), AX_OK);
	cr_assert_eq(ax_exec_start(nx, &s), AX_EEXIST);
	s.run_id = "noop-2";
	cr_assert_eq(ax_exec_start(nx, &s), AX_OK);
	cr_assert_eq(ax_exec_running(nx), 2);
	cr_assert_eq(poll(&pfd, 1, 0), 1, "fd must wake the loop");

	cr_assert_eq(ax_exec_poll(nx, ax_clock_mono_us(), r, 1, &n), AX_OK);
	cr_assert_eq(n, 1);
	cr_assert_eq(ax_exec_next_deadline(nx), 0, "one result still waits");
	cr_assert_eq(ax_exec_poll(nx, ax_clock_mono_us(), r + 1, 2, &n),
	             AX_OK);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(r[0].run_id, "noop-1");
	cr_assert_str_eq(r[1].run_id, "noop-2");
	cr_assert_eq(r[0].status, AX_EXEC_SUCCESS);
	cr_assert_eq(r[0].exit_code, 0);
	cr_assert_eq(r[0].pid, 0);
	cr_assert_eq(r[0].user, &u);
	cr_assert_geq(r[0].started_at, t0);
	cr_assert_eq(r[0].ended_at, r[0].started_at);
	cr_assert_eq(ax_exec_running(nx), 0);
	cr_assert_eq(ax_exec_next_deadline(nx), INT64_MAX);
	cr_assert_eq(poll(&pfd, 1, 0), 0, "drained fd must be quiet");
	cr_assert_eq(ax_exec_kill(nx, "noop-1", 0), AX_ENOENT);
	s.run_id = "";
	cr_assert_eq(ax_exec_start(nx, &s), AX_EINVAL);
	ax_exec_free(nx);
}

/* ------------------------------------------------------------------ */
/* identity and environment                                            */

Test(executor, environment_is_clean_of_the_workers)
{
	char         log[256];
	char *const  env[] = { "TASKVAR=mine", NULL };
	ax_exec_spec s = spec_for("run-clean", "env | sort", log, sizeof(log));
	struct passwd *pw = getpwuid(geteuid());
	char           want[512];

	setenv("AX_TEST_WORKER_CANARY", "leaked", 1);
	setenv("AX_DATABASE_DSN", "password=secret", 1);
	s.env            = env;
	ax_exec_result r = run_one(&s, 5000);
	unsetenv("AX_TEST_WORKER_CANARY");
	unsetenv("AX_DATABASE_DSN");
	cr_assert_eq(r.status, AX_EXEC_SUCCESS);
	const char *out = slurp(log);
	cr_assert_null(strstr(out, "CANARY"), "%s", out);
	cr_assert_null(strstr(out, "secret"), "%s", out);
	cr_assert_not_null(strstr(out, "TASKVAR=mine\n"), "%s", out);
	cr_assert_not_null(strstr(out, "AX_RUN_ID=run-clean\n"), "%s", out);
	snprintf(want, sizeof(want), "\nPATH=%s\n",
	         geteuid() == 0 ? AX_EXEC_ROOT_PATH : AX_EXEC_PATH);
	cr_assert_not_null(strstr(out, want), "%s", out);
	if (pw != NULL) {
		snprintf(want, sizeof(want), "\nUSER=%s\n", pw->pw_name);
		cr_assert_not_null(strstr(out, want), "%s", out);
		snprintf(want, sizeof(want), "\nHOME=%s\n", pw->pw_dir);
		cr_assert_not_null(strstr(out, want), "%s", out);
	}
}

Test(executor, task_env_overrides_the_base_variables)
{
	char         log[256];
	char *const  env[] = { "PATH=/opt/x/bin:/usr/bin:/bin", "HOME=/h",
		               NULL };
	ax_exec_spec s =
	    spec_for("run-path", "echo \"$PATH|$HOME\"", log, sizeof(log));
	s.env = env;
	cr_assert_eq(run_one(&s, 5000).status, AX_EXEC_SUCCESS);
	cr_assert_str_eq(slurp(log), "/opt/x/bin:/usr/bin:/bin|/h\n");
}

Test(executor, runs_as_the_task_user_with_its_groups_and_home)
{
	uid_t         uid = ax_test_task_user();
	ax_exec_cred *c;
	char          log[256], want[512];

	if (uid == (uid_t) -1)
		cr_skip_test("not root: cannot switch users");
	cr_assert_eq(ax_exec_cred_lookup(AX_TEST_TASK_USER, &c), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(c->uid, uid);
	cr_assert(c->switch_ids);
	cr_assert_geq(c->n_groups, 1);
	int cg = ax_exec_use_cgroups(ex) == AX_OK; /* where it works */
	ax_exec_spec s =
	    spec_for("run-as",
	             "echo \"$(id -u) $(id -g) $(id -G) $(id -ru)\"; pwd; "
	             "echo \"$HOME $USER $LOGNAME $SHELL\"; "
	             "cat /proc/self/cgroup; "
	             "touch /etc/ax-exec-test-owned && echo ROOT",
	             log, sizeof(log));
	s.workdir        = NULL; /* the user's home */
	s.cred           = c;
	ax_exec_result r = run_one(&s, 5000);
	cr_assert_eq(r.status, AX_EXEC_FAILED, "%s", slurp(log));
	const char *out = slurp(log);
	snprintf(want, sizeof(want), "%u %u %u %u\n%s\n%s %s %s %s\n",
	         (unsigned) uid, (unsigned) c->gid, (unsigned) c->gid,
	         (unsigned) uid, c->home, c->home, c->name, c->name, c->shell);
	cr_assert_eq(strncmp(out, want, strlen(want)), 0,
	             "got:\n%s\nwant:\n%s", out, want);
	cr_assert_null(strstr(out, "ROOT"), "%s", out);
	cr_assert_neq(access("/etc/ax-exec-test-owned", F_OK), 0);
	/* born in the attempt's cgroup, which the worker made as root */
	if (cg)
		cr_assert_not_null(strstr(out, "/ax-"), "%s", out);
	free(c);
}

Test(executor, workdir_is_entered_as_the_task_user)
{
	ax_exec_cred *c;
	char          log[256], mark[128];

	if (ax_test_task_user() == (uid_t) -1)
		cr_skip_test("not root: cannot switch users");
	cr_assert_eq(ax_exec_cred_lookup(AX_TEST_TASK_USER, &c), AX_OK);
	chmod(tmpdir, 0700); /* root's: the user may not enter it */
	snprintf(mark, sizeof(mark), "%s/ran", tmpdir);
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "touch %s", mark);
	ax_exec_spec s = spec_for("run-wd", cmd, log, sizeof(log));
	s.cred         = c;
	cr_assert_eq(ax_exec_start(ex, &s), AX_EPERM, "%s", ax_err_detail());
	cr_assert_not_null(strstr(ax_err_detail(), "chdir"), "%s",
	                   ax_err_detail());
	cr_assert_not_null(strstr(slurp(log), "Permission denied"), "%s",
	                   slurp(log));
	cr_assert_neq(access(mark, F_OK), 0, "the task must not have run");
	cr_assert_eq(ax_exec_running(ex), 0);
	free(c);
}

Test(executor, failed_identity_drop_runs_nothing)
{
	static gid_t  many[70000]; /* above NGROUPS_MAX: setgroups fails */
	ax_exec_cred *c;
	char          log[256], mark[128], cmd[200];

	if (ax_test_task_user() == (uid_t) -1)
		cr_skip_test("not root: cannot switch users");
	cr_assert_eq(ax_exec_cred_lookup(AX_TEST_TASK_USER, &c), AX_OK);
	ax_exec_cred bad = *c;
	bad.groups       = many;
	bad.n_groups     = sizeof(many) / sizeof(many[0]);
	snprintf(mark, sizeof(mark), "%s/ran", tmpdir);
	snprintf(cmd, sizeof(cmd), "touch %s", mark);
	ax_exec_spec s = spec_for("run-drop", cmd, log, sizeof(log));
	s.cred         = &bad;
	cr_assert_neq(ax_exec_start(ex, &s), AX_OK);
	cr_assert_not_null(strstr(ax_err_detail(), "setgroups"), "%s",
	                   ax_err_detail());
	cr_assert_neq(access(mark, F_OK), 0, "the task must not have run");
	free(c);
}

Test(executor, cred_lookup_of_an_unknown_user)
{
	ax_exec_cred *c = (ax_exec_cred *) 1;
	cr_assert_eq(ax_exec_cred_lookup("ax-no-such-user-x", &c), AX_ENOENT);
	cr_assert_null(c);
	cr_assert_not_null(strstr(ax_err_detail(), "'ax-no-such-user-x'"));
	cr_assert_eq(ax_exec_cred_lookup(NULL, &c), AX_OK);
	cr_assert_eq(c->uid, geteuid());
	cr_assert_not(c->switch_ids);
	free(c);
}
