/*
 * test_task_env.c - what a dispatched task runs as and with
 * (worker/task_env.h): run_as against worker.run_as_allowed, env values
 * from files under worker.secrets_dir and from listed worker variables;
 * every refusal names the key, the source and the config key, never
 * the value.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "task_env.h"
#include "task_user.h"

static char          dir[64], outside[96];
static ax_exec_cred *self;

static void
put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

static void
setup(void)
{
	char p[160];
	strcpy(dir, "/tmp/ax-secrets-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(p, sizeof(p), "%s/pg", dir);
	put(p, "s3cr3t\n");
	snprintf(p, sizeof(p), "%s/two", dir);
	put(p, "line1\nline2\n\n");
	snprintf(outside, sizeof(outside), "%s.outside", dir);
	put(outside, "not for tasks\n");
	snprintf(p, sizeof(p), "%s/link", dir);
	cr_assert_eq(symlink(outside, p), 0);
	cr_assert_eq(ax_exec_cred_lookup(NULL, &self), AX_OK);
}

static void
teardown(void)
{
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", dir, outside);
	if (system(cmd) != 0)
		cr_log_warn("cannot remove %s", dir);
	free(self);
	self = NULL;
	unsetenv("AX_TEST_TOKEN");
}

TestSuite(task_env, .init = setup, .fini = teardown, .timeout = 30);

static ax_task_policy
policy(void)
{
	return (ax_task_policy) { .dflt        = self,
		                  .allowed     = "etl, reports",
		                  .secrets_dir = dir,
		                  .secrets_env = "AX_TEST_TOKEN, OTHER" };
}

static ax_err
read_src(const char *key, const char *file, const char *var, char **out)
{
	ax_task_policy  p = policy();
	ax_task_env_src s = { key, file, var };
	return ax_task_env_read(&p, &s, out);
}

Test(task_env, from_file_reads_the_value_without_its_newline)
{
	char path[160], *kv;
	snprintf(path, sizeof(path), "%s/pg", dir);
	cr_assert_eq(read_src("PASSWORD", path, NULL, &kv), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_str_eq(kv, "PASSWORD=s3cr3t");
	ax_task_env_wipe(kv);
	snprintf(path, sizeof(path), "%s/two", dir);
	cr_assert_eq(read_src("K", path, NULL, &kv), AX_OK);
	cr_assert_str_eq(kv, "K=line1\nline2\n"); /* only one is dropped */
	ax_task_env_wipe(kv);
}

struct refusal {
	const char *file; /* relative to dir unless absolute; NULL: none */
	const char *var;
	ax_err      rv;
	const char *detail;
};

Test(task_env, refusals_name_key_and_source_never_the_value)
{
	char                 rel[160];
	const struct refusal cases[] = {
		{ "missing", NULL, AX_ENOENT, "env KEY: from_file " },
		{ "link", NULL, AX_EPERM, "is not under worker.secrets_dir" },
		{ "/etc/shadow", NULL, AX_EPERM,
		  "is not under worker.secrets_dir" },
		{ "../x", NULL, AX_EPERM, "must be an absolute path" },
		{ ".", NULL, AX_EPERM, "is not under worker.secrets_dir" },
		{ NULL, "PATH", AX_EPERM,
		  "env KEY: from_env PATH: the worker does not hand out that "
		  "variable; its operator may list it in worker.secrets_env" },
		{ NULL, "OTHER", AX_ENOENT,
		  "env KEY: from_env OTHER: the worker's environment has no "
		  "such variable" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct refusal *c  = &cases[i];
		char                 *kv = (char *) 1;
		const char           *f  = c->file;
		if (f != NULL && f[0] != '/' && strncmp(f, "..", 2) != 0) {
			snprintf(rel, sizeof(rel), "%s/%s", dir, f);
			f = rel;
		}
		cr_assert_eq(read_src("KEY", f, c->var, &kv), c->rv,
		             "case %zu: %s", i, ax_err_detail());
		cr_assert_null(kv);
		cr_assert_not_null(strstr(ax_err_detail(), c->detail),
		                   "case %zu: %s", i, ax_err_detail());
		cr_assert_null(strstr(ax_err_detail(), "not for tasks"));
	}
}

Test(task_env, from_env_reads_a_listed_variable)
{
	char *kv;
	setenv("AX_TEST_TOKEN", "tok-123", 1);
	cr_assert_eq(read_src("TOKEN", NULL, "AX_TEST_TOKEN", &kv), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_str_eq(kv, "TOKEN=tok-123");
	ax_task_env_wipe(kv);
}

Test(task_env, a_secrets_dir_that_is_missing_is_named)
{
	ax_task_policy  p  = policy();
	ax_task_env_src s  = { "K", "/etc/ax/nowhere/x", NULL };
	char           *kv = NULL;
	p.secrets_dir      = "/etc/ax/nowhere";
	cr_assert_eq(ax_task_env_read(&p, &s, &kv), AX_EPERM);
	cr_assert_not_null(
	    strstr(ax_err_detail(), "worker.secrets_dir '/etc/ax/nowhere'"),
	    "%s", ax_err_detail());
}

Test(task_env, oversized_and_binary_files_are_refused)
{
	char  path[160], *kv = NULL;
	FILE *f;
	snprintf(path, sizeof(path), "%s/big", dir);
	f = fopen(path, "w");
	for (int i = 0; i < 70000; i++)
		fputc('x', f);
	fclose(f);
	cr_assert_eq(read_src("K", path, NULL, &kv), AX_EINVAL);
	cr_assert_not_null(strstr(ax_err_detail(), "too large"));
	snprintf(path, sizeof(path), "%s/bin", dir);
	f = fopen(path, "w");
	fwrite("a\0b", 1, 3, f);
	fclose(f);
	cr_assert_eq(read_src("K", path, NULL, &kv), AX_EINVAL);
	cr_assert_not_null(strstr(ax_err_detail(), "NUL"));
}

Test(task_env, run_as_must_be_allowed)
{
	ax_task_policy      p = policy();
	ax_exec_cred       *own;
	const ax_exec_cred *c;

	cr_assert_eq(ax_task_cred(&p, "", &own, &c), AX_OK);
	cr_assert_eq(c, self);
	cr_assert_null(own);
	cr_assert_eq(ax_task_cred(&p, self->name, &own, &c), AX_OK);
	cr_assert_eq(c, self);
	cr_assert_eq(ax_task_cred(&p, "mallory", &own, &c), AX_EPERM);
	cr_assert_null(own);
	cr_assert_not_null(
	    strstr(ax_err_detail(),
	           "run_as 'mallory': this worker does not allow it, so the "
	           "task did not run; its operator may add the user to "
	           "worker.run_as_allowed"),
	    "%s", ax_err_detail());
	cr_assert_not_null(strstr(ax_err_detail(),
	                          "(allowed now: etl, "
	                          "reports)"));
	/* allowed but absent */
	cr_assert_eq(ax_task_cred(&p, "etl", &own, &c), AX_ENOENT);
	cr_assert_not_null(strstr(ax_err_detail(), "no such user"));
}

Test(task_env, run_as_an_allowed_user_switches_as_root)
{
	ax_task_policy      p = policy();
	ax_exec_cred       *own;
	const ax_exec_cred *c;
	uid_t               uid = ax_test_task_user();

	if (uid == (uid_t) -1)
		cr_skip_test("not root");
	p.allowed = "etl, " AX_TEST_TASK_USER;
	cr_assert_eq(ax_task_cred(&p, AX_TEST_TASK_USER, &own, &c), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_eq(c, own);
	cr_assert_eq(c->uid, uid);
	cr_assert(c->switch_ids);
	free(own);
}

Test(task_env, default_user_must_exist_when_root)
{
	ax_exec_cred *c = NULL;
	if (geteuid() != 0) {
		/* not root: run_as is ignored, tasks run as ourselves */
		cr_assert_eq(ax_task_default_cred("ax-no-such-user-x", &c),
		             AX_OK);
		cr_assert_eq(c->uid, geteuid());
		free(c);
		return;
	}
	cr_assert_eq(ax_task_default_cred("ax-no-such-user-x", &c),
	             AX_ECONFIG);
	cr_assert_not_null(strstr(ax_err_detail(),
	                          "worker.run_as: no user "
	                          "'ax-no-such-user-x'"),
	                   "%s", ax_err_detail());
	cr_assert_not_null(strstr(ax_err_detail(), "deploy/install-deps.sh"));
	cr_assert_eq(ax_task_default_cred("root", &c), AX_OK);
	cr_assert_eq(c->uid, 0);
	cr_assert_not(c->switch_ids);
	free(c);
}
