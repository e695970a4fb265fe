/*
 * test_worker_fence.c - a task never outlives its worker, and never runs
 * past the worker's lease: real axd, ax-worker and PostgreSQL processes
 * (tests/e2e/e2e_harness.h), real kill -9 and SIGSTOP.
 *
 * The task of every test writes the pids of its main process, a child
 * and a double-forked grandchild to a marks directory, then sleeps; if
 * it ever finishes it appends its run_id to marks/done. The tests check
 * the processes themselves (/proc), not only what the database says.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "e2e_harness.h"
#include "proc_watch.h"

static ax_e2e *e;
static char    marks[256];

static void
setup(void)
{
	/* Inherited by the daemons: a short worker lease so fencing shows
	 * within seconds. */
	setenv("AX_WORKER_LEASE", "2s", 1);
	setenv("AX_WORKER_HEARTBEAT", "300ms", 1);
	setenv("AX_WORKER_KILL_GRACE", "1s", 1);
	setenv("AX_SCHEDULER_LEASE_TTL", "3s", 1);
	e = NULL;
	ax_e2e_marks_new(marks, sizeof(marks), "ax-fence");
}

static void
teardown(void)
{
	ax_e2e_free(e);
	e = NULL;
	ax_e2e_marks_free(marks);
}

TestSuite(worker_fence, .init = setup, .fini = teardown, .timeout = 240);

/* The three pids (main child grandchild) of attempt number `attempt`. */
static void
task_pids(int attempt, pid_t p[3], int limit_s)
{
	char    path[PATH_MAX + 32];
	int64_t end = ax_clock_mono_us() + limit_s * AX_USEC_PER_SEC;
	FILE   *f;

	snprintf(path, sizeof(path), "%s/pids.%d", marks, attempt);
	while ((f = fopen(path, "r")) == NULL) {
		if (ax_clock_mono_us() > end) {
			ax_e2e_dump(e);
			cr_assert_fail("the task never wrote %s", path);
		}
		ax_clock_sleep_us(20 * AX_USEC_PER_MSEC);
	}
	cr_assert_eq(fscanf(f, "%d %d %d", &p[0], &p[1], &p[2]), 3);
	fclose(f);
	for (int i = 0; i < 3; i++)
		cr_assert(ax_test_alive(p[i]), "task pid %d is not running",
		          p[i]);
}

/* Whether the task ever got to its end (marks/done exists). */
static int
task_finished(void)
{
	char path[PATH_MAX + 8];
	snprintf(path, sizeof(path), "%s/done", marks);
	return access(path, F_OK) == 0;
}

/* Loads a DAG whose one task spawns, sleeps 6 s, marks done; it starts
 * 2 s from now. */
static void
load_spawner(const char *retries)
{
	char at[32], yaml[4096];

	snprintf(
	    yaml, sizeof(yaml),
	    "kind: DAG\nname: e2e.fence\nschedule: {at: \"%s\"}\n"
	    "tasks:\n"
	    "  - name: spawner\n"
	    "%s"
	    "    command: |\n"
	    "      d=%s\n"
	    "      (sleep 100 & echo $! > $d/gc.$AX_ATTEMPT)\n"
	    "      sleep 100 &\n"
	    "      c=$!\n"
	    "      echo $$ $c $(cat $d/gc.$AX_ATTEMPT) > $d/t.$AX_ATTEMPT\n"
	    "      mv $d/t.$AX_ATTEMPT $d/pids.$AX_ATTEMPT\n"
	    "      sleep 6\n"
	    "      echo $AX_RUN_ID >> $d/done\n",
	    ax_e2e_at(2, at, sizeof(at)), retries, marks);
	ax_e2e_load(e, "fence", NULL, yaml);
}

/* Line number (1-based) of the last line of the file containing needle
 * after line `after`, or 0. */
static int
log_line(const char *path, const char *needle, int after)
{
	char  line[8192];
	int   n = 0, hit = 0;
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (++n > after && strstr(line, needle) != NULL && hit == 0)
			hit = n;
	fclose(f);
	return hit;
}

static void
worker_log(char *buf, size_t len)
{
	snprintf(buf, len, "%s/worker-1.log", e->st.log_dir);
}

Test(worker_fence, kill9_of_the_worker_takes_its_task_along)
{
	pid_t   p[3];
	int64_t took;

	e = ax_e2e_new(1, NULL);
	load_spawner("");
	ax_e2e_start_axd(e);
	ax_e2e_start_workers(e);
	task_pids(1, p, 60);
	ax_e2e_kill_worker(e, 0, SIGKILL);
	took = ax_test_wait_gone(p, 3, 1000);
	ax_test_kill_all(p, 3);
	cr_assert_geq(took, 0,
	              "task processes %d %d %d outlived their worker "
	              "(kill -9) by more than 1 s",
	              p[0], p[1], p[2]);
	cr_log_info("task gone %lld ms after kill -9 of its worker",
	            (long long) (took / AX_USEC_PER_MSEC));
	/* retries: 0, so the instance fails; the task must not go on to
	 * succeed behind the scheduler's back */
	ax_e2e_wait(e, 30, "the instance to fail",
	            "SELECT count(*) FROM task_instances WHERE state = "
	            "'FAILED'");
	ax_clock_sleep_us(7 * AX_USEC_PER_SEC);
	cr_assert(!task_finished(), "the task finished after its worker died");
}

Test(worker_fence, restart_with_the_same_id_kills_what_the_last_life_left)
{
	char  logp[PATH_MAX + 64], cmd[PATH_MAX + 128];
	pid_t p[3], shim;
	int   killed_at, reg_at;

	e = ax_e2e_new(1, NULL);
	load_spawner("");
	ax_e2e_start_axd(e);
	ax_e2e_start_workers(e);
	task_pids(1, p, 60);
	snprintf(cmd, sizeof(cmd),
	         "test $(ls %s/state/worker/standalone-1/*.task | wc -l) = 1",
	         e->st.home);
	cr_assert_eq(system(cmd), 0, "no state record of the running task");
	/* The worker dies together with the task's supervisor (as when
	 * both are killed at once): the task's group is orphaned. (Stopping
	 * the shim instead would not do: when the worker dies, the kernel
	 * wakes the stopped members of an orphaned process group.) */
	shim = ax_test_ppid(p[0]);
	cr_assert_gt(shim, 0);
	/* stopped, the worker cannot react to its shim's death */
	kill(e->st.workers[0].pid, SIGSTOP);
	kill(shim, SIGKILL);
	ax_e2e_kill_worker(e, 0, SIGKILL);
	ax_clock_sleep_us(500 * AX_USEC_PER_MSEC);
	for (int i = 0; i < 3; i++)
		cr_assert(ax_test_alive(p[i]), "pid %d died with its worker",
		          p[i]);

	cr_assert_eq(ax_stack_start_worker(&e->st, 0), AX_OK, "%s",
	             ax_err_detail());
	if (ax_test_wait_gone(p, 3, 10000) < 0) {
		ax_test_kill_all(p, 3);
		ax_e2e_dump(e);
		cr_assert_fail("the restarted worker did not kill the task "
		               "its previous life left");
	}
	/* and it did so before it registered */
	worker_log(logp, sizeof(logp));
	killed_at = log_line(logp, "LEFTOVERS_KILLED", 0);
	for (int i = 0; killed_at == 0 && i < 100; i++) {
		ax_clock_sleep_us(100 * AX_USEC_PER_MSEC);
		killed_at = log_line(logp, "LEFTOVERS_KILLED", 0);
	}
	cr_assert_gt(killed_at, 0, "no LEFTOVERS_KILLED in %s", logp);
	reg_at = log_line(logp, "registered as", killed_at);
	for (int i = 0; reg_at == 0 && i < 100; i++) {
		ax_clock_sleep_us(100 * AX_USEC_PER_MSEC);
		reg_at = log_line(logp, "registered as", killed_at);
	}
	cr_assert_gt(reg_at, killed_at, "killed after registering");
	ax_clock_sleep_us(7 * AX_USEC_PER_SEC);
	cr_assert(!task_finished(), "the orphaned task went on to finish");
}

Test(worker_fence, stopped_worker_fences_itself_and_registers_again)
{
	char    logp[PATH_MAX + 64];
	pid_t   p[3], w;
	int64_t t0, took;
	int     fenced_at, reg_at = 0;

	e = ax_e2e_new(1, NULL);
	load_spawner("");
	ax_e2e_start_axd(e);
	ax_e2e_start_workers(e);
	task_pids(1, p, 60);
	w  = e->st.workers[0].pid;
	t0 = ax_clock_mono_us();
	cr_assert_eq(kill(w, SIGSTOP), 0);
	/* The lease (2 s) lapses while the worker is stopped: its task must
	 * die by then, before the scheduler may hand the attempt on. */
	took = ax_test_wait_gone(p, 3, 3500);
	if (took < 0) {
		kill(w, SIGCONT);
		ax_test_kill_all(p, 3);
		cr_assert_fail("the task outlived its stopped worker's lease");
	}
	cr_log_info(
	    "task killed %lld ms after SIGSTOP of its worker "
	    "(lease 2 s)",
	    (long long) ((ax_clock_mono_us() - t0) / AX_USEC_PER_MSEC));
	/* stay stopped past lease + any grace of the scheduler */
	while (ax_clock_mono_us() - t0 < 4 * AX_USEC_PER_SEC)
		ax_clock_sleep_us(50 * AX_USEC_PER_MSEC);
	cr_assert_eq(kill(w, SIGCONT), 0);
	worker_log(logp, sizeof(logp));
	for (int i = 0; i < 100; i++) {
		fenced_at = log_line(logp, "WORKER_FENCED", 0);
		if (fenced_at > 0 &&
		    (reg_at = log_line(logp, "registered as", fenced_at)) > 0)
			break;
		ax_clock_sleep_us(100 * AX_USEC_PER_MSEC);
	}
	if (fenced_at == 0 || reg_at == 0)
		ax_e2e_dump(e);
	cr_assert_gt(fenced_at, 0, "the worker did not fence itself");
	cr_assert_gt(reg_at, fenced_at, "the worker did not register again");
	ax_e2e_wait(e, 20, "the worker to be active again",
	            "SELECT count(*) FROM workers WHERE id = 'standalone-1' "
	            "AND state = 'ACTIVE'");
	ax_clock_sleep_us(5 * AX_USEC_PER_SEC);
	cr_assert(!task_finished(), "the fenced task finished");
}

Test(worker_fence, unusable_state_dir_is_reported_and_the_worker_runs)
{
	char        bin[PATH_MAX], out[PATH_MAX + 16], addr[PATH_MAX + 16];
	char        buf[8192];
	const char *dir = getenv("AX_BIN_DIR");
	int         st  = 0;
	size_t      n;
	FILE       *f;
	pid_t       w;

	cr_assert_not_null(dir, "AX_BIN_DIR is not set");
	snprintf(bin, sizeof(bin), "%s/ax-worker", dir);
	snprintf(out, sizeof(out), "%s/worker.out", marks);
	snprintf(addr, sizeof(addr), "ipc://%s/nobody.ipc", marks);
	w = fork();
	cr_assert_geq(w, 0);
	if (w == 0) {
		if (freopen(out, "w", stderr) == NULL)
			_exit(126);
		/* /proc refuses a mkdir: records cannot be kept there */
		setenv("AX_WORKER_STATE_DIR", "/proc/ax-no-such-dir", 1);
		setenv("AX_HOME", marks, 1);
		execl(bin, bin, "--server", addr, "--id", "fence-nodir",
		      (char *) NULL);
		_exit(127);
	}
	ax_clock_sleep_us(1500 * AX_USEC_PER_MSEC);
	cr_assert_eq(waitpid(w, &st, WNOHANG), 0, "the worker exited");
	kill(w, SIGTERM);
	cr_assert_eq(waitpid(w, &st, 0), w);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
	cr_assert_not_null(f = fopen(out, "r"));
	n      = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	cr_assert_not_null(strstr(buf, "NO_STATE_DIR"), "%s", buf);
	cr_assert_not_null(strstr(buf, "/proc/ax-no-such-dir"), "%s", buf);
	cr_assert_not_null(strstr(buf, "worker.state_dir"), "%s", buf);
}
