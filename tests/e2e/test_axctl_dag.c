/*
 * test_axctl_dag.c - `axctl dag validate` and `axctl dag load` as a user
 * runs them: the real binary ($AXCTL), exit codes 0 / 1 / 2, errors on
 * stderr as FILE:LINE:COL: error: MESSAGE; load against a harness
 * cluster reports created / unchanged per DAG.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ax_config.h"
#include "pg_harness.h"

#include "cli_run.h"

static char out[65536];
static char err[65536];
static char dir[64];

#define axctl(...) AX_CLI_AXCTL(__VA_ARGS__)

static void
write_file(const char *name, const char *text)
{
	char  path[256];
	FILE *f;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	cr_assert_not_null(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
}

static void
setup(void)
{
	unsetenv("AX_DSN");
	unsetenv("AX_HOME");
	snprintf(dir, sizeof(dir), "/tmp/ax-test-dag-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(chdir(dir), 0);
}

static void
teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

TestSuite(axctl_dag, .init = setup, .fini = teardown, .timeout = 180);

#define HAS(buf, s)                                                           \
	cr_assert(strstr(buf, s) != NULL, "no '%s' in:\n%s", s, buf)

static const char *good = "kind: DAG\nname: demo.diamond\n"
                          "schedule: {cron: \"0 30 2 * * ?\", timezone: "
                          "Asia/Shanghai}\n"
                          "tasks:\n"
                          "  - {name: a, type: bash, command: \"echo {{ ds "
                          "}}\"}\n"
                          "  - {name: b, type: bash, command: \"echo b\", "
                          "depends_on: [a]}\n";

static const char *bad = "kind: DAG\nname: bad.one\n"
                         "tasks:\n"
                         "  - {name: a, command: \"echo {{ dss }}\"}\n"
                         "  - {name: b, comand: echo, depends_on: [x]}\n";

Test(axctl_dag, validate_exit_codes_and_messages)
{
	write_file("good.yaml", good);
	write_file("bad.yaml", bad);

	cr_assert_eq(axctl("dag", "validate", "good.yaml", NULL), 0, "%s%s",
	             out, err);
	HAS(out, "ok: 1 DAG, 0 templates in 1 file");
	cr_assert_str_eq(err, "");

	cr_assert_eq(axctl("dag", "validate", "good.yaml", "bad.yaml", NULL),
	             1);
	HAS(err,
	    "bad.yaml:4:33: error: command: unknown template variable "
	    "'dss'; did you mean 'ds'?\n");
	HAS(err, "bad.yaml:5:12: error: task 'b' has no command");
	HAS(err,
	    "bad.yaml:5:15: error: unknown key 'comand' in task; did "
	    "you mean 'command'?\n");
	HAS(err,
	    "bad.yaml:5:42: error: task 'b' depends on unknown task 'x'; "
	    "did you mean 'a'?\n");
	HAS(err, "4 errors");
	cr_assert_null(strstr(err, "good.yaml"));

	cr_assert_eq(axctl("dag", "validate", "missing.yaml", NULL), 1);
	HAS(err,
	    "missing.yaml:1:1: error: cannot read: No such file or "
	    "directory");

	/* usage errors */
	cr_assert_eq(axctl("dag", "validate", NULL), 2);
	cr_assert_eq(axctl("dag", "validate", "--bogus", "good.yaml", NULL),
	             2);
	cr_assert_eq(axctl("dag", NULL), 2);
	cr_assert_eq(axctl("dag", "frobnicate", NULL), 2);
	cr_assert_eq(axctl("dag", "--help", NULL), 0);
	HAS(out, "axctl dag validate FILE...");
}

Test(axctl_dag, examples_folder_validates)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "\"%s\" dag validate %s/examples/*.yaml",
	         getenv("AXCTL"), AX_SOURCE_ROOT);
	cr_assert_eq(system(cmd), 0);
}

Test(axctl_dag, load_reports_created_then_unchanged)
{
	ax_test_pg *pg;
	char        sub[128];

	cr_assert_eq(ax_test_pg_start_migrated(&pg), AX_OK, "%s",
	             ax_err_detail());
	snprintf(sub, sizeof(sub), "%s/dags", dir);
	cr_assert_eq(mkdir(sub, 0755), 0);
	snprintf(sub, sizeof(sub), "dags/good.yaml");
	write_file(sub, good);

	int rc =
	    axctl("dag", "load", "--dsn", ax_test_pg_dsn(pg), "dags", NULL);
	cr_assert_eq(rc, 0, "%s%s", out, err);
	HAS(out, "demo.diamond");
	HAS(out, "created");
	rc = axctl("dag", "load", "--dsn", ax_test_pg_dsn(pg), "dags", NULL);
	cr_assert_eq(rc, 0, "%s%s", out, err);
	HAS(out, "unchanged");

	/* a bad file: its DAG is skipped, the others load, exit 1 */
	write_file("dags/bad.yml", bad);
	rc = axctl("dag", "load", "--dsn", ax_test_pg_dsn(pg), "dags", NULL);
	cr_assert_eq(rc, 1, "%s%s", out, err);
	HAS(out, "unchanged");
	HAS(out, "skipped");
	HAS(err, "dags/bad.yml:4:33: error:");

	cr_assert_eq(axctl("dag", "load", "--dsn", ax_test_pg_dsn(pg),
	                   "no-such-dir", NULL),
	             1);
	HAS(err, "cannot open folder 'no-such-dir'");
	ax_test_pg_stop(pg);
}
