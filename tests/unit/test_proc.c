/*
 * test_proc.c - child supervision (cli/proc.h): start with log and env,
 * exit status, stop with TERM then KILL of the whole group, exec errors,
 * the binary lookup and the log tail.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "proc.h"

static char dir[64];

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/ax-test-proc-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void
teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		cr_log_warn("cannot remove %s", dir);
}

TestSuite(proc, .init = setup, .fini = teardown, .timeout = 30);

static void
path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

static void
slurp(const char *file, char *buf, size_t len)
{
	FILE  *f = fopen(file, "r");
	size_t n = 0;
	if (f != NULL) {
		n = fread(buf, 1, len - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
}

Test(proc, runs_with_env_and_log_and_reports_exit_status)
{
	char         log[128], out[256], how[64];
	const char  *env[]  = { "AX_PROC_TEST=hello", NULL };
	char        *argv[] = { "sh", "-c",
		                "echo out $AX_PROC_TEST; echo err >&2; "
		                       "exit 3",
		                NULL };
	ax_proc_opts opts   = { .env = env };
	ax_proc      p;

	path(log, sizeof(log), "child.log");
	cr_assert_eq(ax_proc_start(&p, "sh", "/bin/sh", argv, log, &opts),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_proc_wait(&p, 5 * AX_USEC_PER_SEC), AX_OK);
	cr_assert_eq(ax_proc_poll(&p), 0);
	cr_assert_str_eq(ax_proc_describe(&p, how, sizeof(how)),
	                 "exited with status 3");
	slurp(log, out, sizeof(out));
	cr_assert_str_eq(out, "out hello\nerr\n");
}

Test(proc, child_has_its_own_process_group)
{
	char    log[128], out[64];
	char   *argv[] = { "sh", "-c", "ps -o pgid= -p $$", NULL };
	ax_proc p;

	path(log, sizeof(log), "pg.log");
	cr_assert_eq(ax_proc_start(&p, "sh", "/bin/sh", argv, log, NULL),
	             AX_OK);
	cr_assert_eq(ax_proc_wait(&p, 5 * AX_USEC_PER_SEC), AX_OK);
	slurp(log, out, sizeof(out));
	cr_assert_eq(atoi(out), (int) p.pid, "pgid %s, pid %d", out,
	             (int) p.pid);
	cr_assert_neq(atoi(out), (int) getpgrp());
}

Test(proc, stop_terminates_the_whole_group)
{
	char    log[128], pidfile[128], buf[64];
	char    script[512];
	pid_t   grandchild;
	ax_proc p;

	path(log, sizeof(log), "grp.log");
	path(pidfile, sizeof(pidfile), "grandchild.pid");
	snprintf(script, sizeof(script), "sleep 300 & echo $! > %s; wait",
	         pidfile);
	char *argv[] = { "sh", "-c", script, NULL };
	cr_assert_eq(ax_proc_start(&p, "sh", "/bin/sh", argv, log, NULL),
	             AX_OK);
	for (int i = 0; i < 500; i++) {
		slurp(pidfile, buf, sizeof(buf));
		if (buf[0] != '\0' && strchr(buf, '\n') != NULL)
			break;
		ax_clock_sleep_us(10000);
	}
	grandchild = (pid_t) atoi(buf);
	cr_assert_gt(grandchild, 0);
	cr_assert_eq(kill(grandchild, 0), 0);
	cr_assert_eq(ax_proc_stop(&p, 5 * AX_USEC_PER_SEC), AX_OK);
	cr_assert_eq(ax_proc_poll(&p), 0);
	cr_assert(p.stopping);
	/* The grandchild was reparented; it must be dead (or a zombie of
	 * init's, which kill(0) still sees for a moment). */
	for (int i = 0; i < 200 && kill(grandchild, 0) == 0; i++) {
		char st[128], line[256];
		snprintf(st, sizeof(st), "/proc/%d/stat", (int) grandchild);
		slurp(st, line, sizeof(line));
		if (strstr(line, ") Z ") != NULL)
			break;
		ax_clock_sleep_us(10000);
	}
	if (kill(grandchild, 0) == 0) {
		char st[128], line[256];
		snprintf(st, sizeof(st), "/proc/%d/stat", (int) grandchild);
		slurp(st, line, sizeof(line));
		cr_assert(strstr(line, ") Z ") != NULL,
		          "grandchild %d survived: %s", (int) grandchild,
		          line);
	}
}

Test(proc, stop_kills_a_child_that_ignores_sigterm)
{
	char    log[128], how[64];
	char   *argv[] = { "sh", "-c",
		           "trap '' TERM; echo ready; "
		             "while :; do sleep 1; done",
		           NULL };
	ax_proc p;

	path(log, sizeof(log), "stubborn.log");
	cr_assert_eq(ax_proc_start(&p, "sh", "/bin/sh", argv, log, NULL),
	             AX_OK);
	ax_clock_sleep_us(200000); /* let the trap be installed */
	int64_t t0 = ax_clock_mono_us();
	cr_assert_eq(ax_proc_stop(&p, 300000), AX_ETIMEDOUT);
	cr_assert_lt(ax_clock_mono_us() - t0, 3 * AX_USEC_PER_SEC);
	cr_assert_str_eq(ax_proc_describe(&p, how, sizeof(how)),
	                 "killed by signal 9 (Killed)");
}

Test(proc, unexpected_exit_is_seen_by_poll)
{
	char    log[128];
	char   *argv[] = { "sh", "-c", "sleep 0.1; kill -9 $$", NULL };
	ax_proc p;

	path(log, sizeof(log), "crash.log");
	cr_assert_eq(ax_proc_start(&p, "sh", "/bin/sh", argv, log, NULL),
	             AX_OK);
	cr_assert_eq(ax_proc_poll(&p), 1);
	cr_assert_eq(ax_proc_wait(&p, 5 * AX_USEC_PER_SEC), AX_OK);
	cr_assert(!p.stopping);
	cr_assert_eq(ax_proc_poll(&p), 0);
}

Test(proc, exec_failure_is_an_error_naming_the_binary)
{
	char    log[128];
	char   *argv[] = { "nope", NULL };
	ax_proc p;

	path(log, sizeof(log), "nope.log");
	cr_assert_eq(
	    ax_proc_start(&p, "nope", "/nonexistent/ax-nope", argv, log, NULL),
	    AX_ENOENT);
	cr_assert(strstr(ax_err_detail(), "/nonexistent/ax-nope") != NULL,
	          "%s", ax_err_detail());
	cr_assert_eq(p.running, 0);
}

Test(proc, unwritable_log_is_an_error_naming_the_log)
{
	char   *argv[] = { "true", NULL };
	ax_proc p;

	cr_assert_neq(ax_proc_start(&p, "true", "/bin/true", argv,
	                            "/nonexistent-dir/x.log", NULL),
	              AX_OK);
	cr_assert(strstr(ax_err_detail(), "/nonexistent-dir/x.log") != NULL,
	          "%s", ax_err_detail());
}

Test(proc, find_bin_uses_ax_bin_dir)
{
	char buf[256], exe[128];

	path(exe, sizeof(exe), "axd");
	FILE *f = fopen(exe, "w");
	cr_assert_not_null(f);
	fputs("#!/bin/sh\n", f);
	fclose(f);
	setenv("AX_BIN_DIR", dir, 1);
	cr_assert_eq(ax_proc_find_bin("axd", buf, sizeof(buf)), AX_ENOENT,
	             "not executable yet");
	cr_assert(strstr(ax_err_detail(), "AX_BIN_DIR") != NULL);
	chmod(exe, 0755);
	cr_assert_eq(ax_proc_find_bin("axd", buf, sizeof(buf)), AX_OK);
	cr_assert_str_eq(buf, exe);
	unsetenv("AX_BIN_DIR");
	/* Without it: next to this test binary, where no axd lives. */
	cr_assert_eq(ax_proc_find_bin("ax-no-such-binary", buf, sizeof(buf)),
	             AX_ENOENT);
}

Test(proc, log_tail_keeps_the_last_lines)
{
	char file[128], buf[64];

	path(file, sizeof(file), "tail.log");
	FILE *f = fopen(file, "w");
	cr_assert_not_null(f);
	for (int i = 1; i <= 100; i++)
		fprintf(f, "line %d\n", i);
	fclose(f);
	cr_assert_str_eq(ax_proc_log_tail(file, 3, buf, sizeof(buf)),
	                 "line 98\nline 99\nline 100\n");
	/* The byte cap wins over the line count. */
	cr_assert_str_eq(ax_proc_log_tail(file, 50, buf, 20),
	                 "line 99\nline 100\n");
	cr_assert_str_eq(ax_proc_log_tail("/nonexistent", 3, buf, sizeof(buf)),
	                 "");
}
