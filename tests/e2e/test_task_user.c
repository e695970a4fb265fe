/*
 * test_task_user.c - who tasks run as and what they see, end to end with
 * the real axd, ax-worker and ax-api: a worker started as root runs
 * tasks as ax-task by default (worker.run_as), as root only when its
 * configuration says so, refuses a task's run_as that
 * worker.run_as_allowed does not list (nothing runs), gives tasks a
 * clean environment (a variable of the worker's environment never
 * reaches them), hands them env values read from files and listed
 * variables of the worker, and those values appear in none of: the
 * API's instance details, event_log, the task's log, the daemons' logs.
 * It refuses to start when worker.run_as names no user.
 *
 * Runs as root (useradd ax-task when missing: tests/task_user.h);
 * skipped otherwise. Budget: about 15 s per test.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api_token.h"
#include "cli_run.h"
#include "e2e_harness.h"
#include "store.h"
#include "task_user.h"

#define SECRET_FILE "pg-secret-9c2e41"
#define SECRET_ENV  "tok-55d1a7"
#define CANARY      "canary-7f3a0b"

static ax_e2e *e;
static char    out[262144], err[16384];
static char    marks[PATH_MAX + 16], secrets[PATH_MAX + 16];

static void
setup(void)
{
	ax_e2e_use_axctl();
	/* in the worker's environment (inherited), never in a task's */
	setenv("AX_E2E_WORKER_CANARY", CANARY, 1);
	setenv("AX_E2E_WORKER_TOKEN", SECRET_ENV, 1);
	e = NULL;
}

static void
teardown(void)
{
	ax_e2e_free(e);
	e = NULL;
}

TestSuite(task_user, .init = setup, .fini = teardown, .timeout = 120);

/* A stack whose worker runs tasks as run_as (NULL: the default), with
 * a marks directory any user may write and a root-only secrets dir. */
static void
start(const char *run_as, int api)
{
	char  path[PATH_MAX + 32];
	FILE *f;

	e = ax_e2e_new_as(1, NULL, run_as);
	snprintf(marks, sizeof(marks), "%s/marks", e->st.home);
	cr_assert_eq(mkdir(marks, 0777), 0);
	cr_assert_eq(chmod(marks, 0777), 0);
	snprintf(secrets, sizeof(secrets), "%s/secrets", e->st.home);
	cr_assert_eq(mkdir(secrets, 0700), 0);
	snprintf(path, sizeof(path), "%s/pg", secrets);
	cr_assert_not_null(f = fopen(path, "w"));
	fputs(SECRET_FILE "\n", f);
	fclose(f);
	cr_assert_eq(chmod(path, 0600), 0);
	setenv("AX_WORKER_SECRETS_DIR", secrets, 1);
	setenv("AX_WORKER_SECRETS_ENV", "AX_E2E_WORKER_TOKEN", 1);
	ax_e2e_start_axd(e);
	ax_e2e_start_workers(e);
	if (api) {
		char url[64], token[AX_API_TOKEN_LEN];
		ax_e2e_start_api_token(e, AX_API_ROLE_ADMIN, "e2e", url,
		                       sizeof(url), token);
	}
}

/* The contents of path ("" when missing; at most cap-1 bytes). */
static char *
slurp(const char *path, char *buf, size_t cap)
{
	FILE  *f;
	size_t n;
	buf[0] = '\0';
	if ((f = fopen(path, "r")) == NULL)
		return buf;
	n      = fread(buf, 1, cap - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* The contents of marks/name. */
static char *
mark(const char *name, char *buf, size_t cap)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/%s", marks, name);
	return slurp(path, buf, cap);
}

static int
has_mark(const char *name)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/%s", marks, name);
	return access(path, F_OK) == 0;
}

/* Waits until every instance of dag is terminal. */
static void
wait_done(const char *dag, int n)
{
	ax_e2e_wait(e, 60, "the tasks to end",
	            "SELECT count(*) = %d FROM task_instances ti JOIN dags d "
	            "ON d.id = ti.dag_id WHERE d.name = '%s' AND ti.state IN "
	            "('SUCCESS', 'FAILED')",
	            n, dag);
}

static char *
state_of(const char *task, char *buf, size_t cap)
{
	return ax_e2e_text(e, buf, cap,
	                   "SELECT state FROM task_instances WHERE task = "
	                   "'%s'",
	                   task);
}

/* The log file of task's attempt, read whole into buf. */
static char *
task_log(const char *task, char *buf, size_t cap)
{
	char path[PATH_MAX];
	ax_e2e_text(e, path, sizeof(path),
	            "SELECT a.log_path FROM attempts a JOIN task_instances ti "
	            "ON ti.id = a.instance_id WHERE ti.task = '%s'",
	            task);
	cr_assert_neq(path[0], '\0', "no log path for %s", task);
	return slurp(path, buf, cap);
}

/* 1 when a file under dir (recursively) contains needle. */
static int
tree_has(const char *dir, const char *needle)
{
	char cmd[PATH_MAX + 128];
	snprintf(cmd, sizeof(cmd), "grep -rqsF -- '%s' '%s'", needle, dir);
	return system(cmd) == 0;
}

Test(task_user, default_user_clean_env_secrets_and_refused_run_as)
{
	uid_t uid = ax_test_task_user();
	char  at[32], yaml[65536], buf[65536], ids[256], st[32];

	if (uid == (uid_t) -1)
		cr_skip_test("not root: the worker cannot switch users");
	start(NULL, 1);
	snprintf(yaml, sizeof(yaml),
	         "kind: DAG\nname: e2e.who\nschedule: {at: \"%s\"}\n"
	         "tasks:\n"
	         "  - name: who\n"
	         "    env:\n"
	         "      PASSWORD: {from_file: %s/pg}\n"
	         "      TOKEN: {from_env: AX_E2E_WORKER_TOKEN}\n"
	         "      PLAIN: visible\n"
	         "    command: |\n"
	         "      id -u > %s/uid\n"
	         "      env > %s/env\n"
	         "      printf %%s \"$PASSWORD\" > %s/pw\n"
	         "      printf %%s \"$TOKEN\" > %s/tok\n"
	         "      pwd > %s/pwd\n"
	         "      echo finished\n"
	         "  - name: as_root\n"
	         "    run_as: root\n"
	         "    command: \"touch %s/as_root\"\n"
	         "  - name: no_secret\n"
	         "    env: {X: {from_file: %s/nope}}\n"
	         "    command: \"touch %s/no_secret\"\n",
	         ax_e2e_at(2, at, sizeof(at)), secrets, marks, marks, marks,
	         marks, marks, marks, secrets, marks);
	ax_e2e_load(e, "who", NULL, yaml);
	wait_done("e2e.who", 3);

	cr_assert_str_eq(state_of("who", st, sizeof(st)), "SUCCESS");
	snprintf(ids, sizeof(ids), "%u\n", (unsigned) uid);
	cr_assert_str_eq(mark("uid", buf, sizeof(buf)), ids,
	                 "the task ran as ax-task, not as root");
	cr_assert_str_eq(mark("pwd", buf, sizeof(buf)), "/var/lib/ax-task\n");
	mark("env", buf, sizeof(buf));
	cr_assert_null(strstr(buf, CANARY), "worker env leaked:\n%s", buf);
	cr_assert_null(strstr(buf, "AX_E2E_WORKER"), "%s", buf);
	cr_assert_null(strstr(buf, "AX_WORKER_SECRETS"), "%s", buf);
	cr_assert_not_null(strstr(buf, "\nPLAIN=visible\n"), "%s", buf);
	cr_assert_not_null(strstr(buf, "HOME=/var/lib/ax-task\n"), "%s", buf);
	cr_assert_not_null(strstr(buf, "USER=ax-task\n"), "%s", buf);
	cr_assert_str_eq(mark("pw", buf, sizeof(buf)), SECRET_FILE);
	cr_assert_str_eq(mark("tok", buf, sizeof(buf)), SECRET_ENV);

	/* run_as root: not in worker.run_as_allowed, so it never ran */
	cr_assert_str_eq(state_of("as_root", st, sizeof(st)), "FAILED");
	cr_assert_not(has_mark("as_root"), "a refused run_as ran");
	task_log("as_root", buf, sizeof(buf));
	cr_assert_not_null(strstr(buf,
	                          "run_as 'root': this worker does not "
	                          "allow it"),
	                   "%s", buf);
	cr_assert_not_null(strstr(buf, "worker.run_as_allowed"), "%s", buf);
	/* a missing secret file: the attempt fails before it runs */
	cr_assert_str_eq(state_of("no_secret", st, sizeof(st)), "FAILED");
	cr_assert_not(has_mark("no_secret"));
	task_log("no_secret", buf, sizeof(buf));
	cr_assert_not_null(strstr(buf, "env X: from_file "), "%s", buf);
	cr_assert_not_null(strstr(buf, "/nope: No such file"), "%s", buf);

	/* the secrets are nowhere but in the task: API, event_log, logs */
	cr_assert_eq(AX_CLI_AXCTL("instance", "list", "--json", NULL), 0, "%s",
	             err);
	cr_assert_null(strstr(out, SECRET_FILE));
	for (int i = 1; i <= 3; i++) {
		char    is[16];
		int64_t id =
		    ax_e2e_int(e,
		               "SELECT id FROM task_instances ORDER BY "
		               "id OFFSET %d LIMIT 1",
		               i - 1);
		snprintf(is, sizeof(is), "%lld", (long long) id);
		cr_assert_eq(
		    AX_CLI_AXCTL("instance", "show", is, "--json", NULL), 0,
		    "%s", err);
		cr_assert_null(strstr(out, SECRET_FILE), "%s", out);
		cr_assert_null(strstr(out, SECRET_ENV), "%s", out);
		cr_assert_eq(AX_CLI_AXCTL("instance", "logs", is, NULL), 0,
		             "%s", err);
		cr_assert_null(strstr(out, SECRET_FILE), "%s", out);
		cr_assert_null(strstr(out, SECRET_ENV), "%s", out);
	}
	cr_assert_eq(AX_CLI_AXCTL("dag", "show", "e2e.who", "--json", NULL), 0,
	             "%s", err);
	cr_assert_null(strstr(out, SECRET_FILE), "%s", out);
	cr_assert_gt(ax_e2e_int(e, "SELECT count(*) FROM event_log"), 5);
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM event_log WHERE "
	                        "payload::text LIKE '%%%s%%' OR payload::text "
	                        "LIKE '%%%s%%' OR coalesce(reason, '') LIKE "
	                        "'%%%s%%'",
	                        SECRET_FILE, SECRET_ENV, SECRET_FILE),
	             0, "a secret is in event_log");
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM dag_versions WHERE "
	                        "definition::text LIKE '%%%s%%'",
	                        SECRET_FILE),
	             0);
	cr_assert_not(tree_has(e->st.log_dir, SECRET_FILE),
	              "a secret is in a log under %s", e->st.log_dir);
	cr_assert_not(tree_has(e->st.log_dir, SECRET_ENV));
	cr_assert_not(tree_has(e->st.log_dir, CANARY));
	/* the check above can fail: the task's own output is in its log */
	cr_assert(tree_has(e->st.log_dir, "finished"));
}

Test(task_user, run_as_root_in_the_worker_config_runs_as_root)
{
	char at[32], yaml[8192], buf[64];

	if (ax_test_task_user() == (uid_t) -1)
		cr_skip_test("not root");
	start("root", 0);
	snprintf(yaml, sizeof(yaml),
	         "kind: DAG\nname: e2e.root\nschedule: {at: \"%s\"}\n"
	         "tasks:\n  - {name: r, command: \"id -u > %s/uid\"}\n",
	         ax_e2e_at(2, at, sizeof(at)), marks);
	ax_e2e_load(e, "root", NULL, yaml);
	wait_done("e2e.root", 1);
	cr_assert_str_eq(mark("uid", buf, sizeof(buf)), "0\n");
}

Test(task_user, allowed_run_as_switches_to_that_user)
{
	char  at[32], yaml[16384], buf[64], want[32];
	uid_t uid = ax_test_task_user();

	if (uid == (uid_t) -1)
		cr_skip_test("not root");
	/* the worker's default is root here; the task asks for ax-task */
	setenv("AX_WORKER_RUN_AS_ALLOWED", "etl, ax-task", 1);
	start("root", 0);
	snprintf(
	    yaml, sizeof(yaml),
	    "kind: DAG\nname: e2e.allowed\nschedule: {at: \"%s\"}\n"
	    "tasks:\n"
	    "  - {name: t, run_as: ax-task, command: \"id -u > %s/uid\"}\n"
	    "  - {name: u, command: \"id -u > %s/uid0\"}\n",
	    ax_e2e_at(2, at, sizeof(at)), marks, marks);
	ax_e2e_load(e, "allowed", NULL, yaml);
	wait_done("e2e.allowed", 2);
	snprintf(want, sizeof(want), "%u\n", (unsigned) uid);
	cr_assert_str_eq(mark("uid", buf, sizeof(buf)), want);
	cr_assert_str_eq(mark("uid0", buf, sizeof(buf)), "0\n");
}

Test(task_user, missing_run_as_user_stops_the_worker_at_start)
{
	char bin[PATH_MAX + 16];

	if (geteuid() != 0)
		cr_skip_test("not root: worker.run_as does not apply");
	e = ax_e2e_new_as(0, NULL, "ax-no-such-user");
	snprintf(bin, sizeof(bin), "%s/ax-worker", getenv("AX_BIN_DIR"));
	int rc = ax_cli_run(out, sizeof(out), err, sizeof(err), bin,
	                    "--config", e->st.config, NULL);
	cr_assert_eq(rc, 2, "exit %d: %s", rc, err);
	cr_assert_not_null(strstr(err,
	                          "worker.run_as: no user "
	                          "'ax-no-such-user'"),
	                   "%s", err);
	cr_assert_not_null(strstr(err, "useradd --system"), "%s", err);
}
