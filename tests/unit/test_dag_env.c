/*
 * test_dag_env.c - a task's run_as and its env values that only the
 * worker reads ({from_file: PATH}, {from_env: NAME}): parsed from YAML
 * with their places, merged like other env entries, kept through the
 * stored JSON form (which holds the source's name, never a value), and
 * every bad form refused with FILE:LINE:COL and what to write.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dag.h"
#include "dag_validate.h"
#include "dag_yaml.h"

static const char *good = "kind: DAG\n"
                          "name: t\n"
                          "defaults:\n"
                          "  env: {PASSWORD: plain-default, REGION: eu}\n"
                          "  run_as: etl\n"
                          "tasks:\n"
                          "  - name: a\n"
                          "    command: \"echo $PASSWORD\"\n"
                          "    env:\n"
                          "      PASSWORD: {from_file: /etc/ax/secrets/pg}\n"
                          "      TOKEN: {from_env: API_TOKEN}\n"
                          "  - name: b\n"
                          "    command: \"echo b\"\n"
                          "    run_as: reports\n";

static ax_dagset *
load(const char *text, ax_err *rv, ax_err *vr)
{
	ax_dagset *set;
	cr_assert_eq(ax_dagset_new(NULL, &set), AX_OK);
	*rv = ax_dag_yaml_load_buf(set, "t.yaml", text, strlen(text));
	*vr = ax_dagset_validate(set);
	return set;
}

static const ax_kv *
env_of(const ax_task *t, const char *key)
{
	for (size_t i = 0; i < t->eff.env.n; i++)
		if (strcmp(t->eff.env.v[i].key, key) == 0)
			return &t->eff.env.v[i];
	return NULL;
}

static void
check_model(const ax_dag *d)
{
	const ax_kv *pw = env_of(&d->tasks[0], "PASSWORD");
	const ax_kv *tk = env_of(&d->tasks[0], "TOKEN");
	const ax_kv *rg = env_of(&d->tasks[0], "REGION");
	cr_assert_not_null(pw);
	cr_assert_eq(pw->source, AX_KV_FROM_FILE); /* the task's wins */
	cr_assert_str_eq(pw->value, "/etc/ax/secrets/pg");
	cr_assert_not_null(tk);
	cr_assert_eq(tk->source, AX_KV_FROM_ENV);
	cr_assert_str_eq(tk->value, "API_TOKEN");
	cr_assert_eq(rg->source, AX_KV_VALUE);
	cr_assert_str_eq(rg->value, "eu");
	cr_assert_str_eq(d->tasks[0].eff.run_as, "etl");
	cr_assert_str_eq(d->tasks[1].eff.run_as, "reports");
	cr_assert_eq(env_of(&d->tasks[1], "PASSWORD")->source, AX_KV_VALUE);
}

Test(dag_env, sources_and_run_as_parse_merge_and_survive_json)
{
	ax_err     rv, vr;
	ax_dagset *set = load(good, &rv, &vr);
	if (rv != AX_OK || vr != AX_OK)
		ax_dagset_print_diags(set, stderr);
	cr_assert_eq(rv, AX_OK);
	cr_assert_eq(vr, AX_OK);
	const ax_dag *d = set->dags[0];
	check_model(d);
	cr_assert_eq(d->tasks[0].spec.env.v[0].pos.line, 10);
	cr_assert_eq(d->tasks[1].spec.run_as_pos.line, 14);

	json_t *j    = ax_dag_to_json(d);
	char   *text = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
	cr_assert_not_null(
	    strstr(text,
	           "\"PASSWORD\":{\"from_file\":\"/etc/ax/secrets/pg\"}"),
	    "%s", text);
	cr_assert_not_null(
	    strstr(text, "\"TOKEN\":{\"from_env\":\"API_TOKEN\"}"), "%s",
	    text);
	cr_assert_not_null(strstr(text, "\"run_as\":\"reports\""), "%s", text);

	ax_dagset *set2;
	ax_dag    *back;
	cr_assert_eq(ax_dagset_new(NULL, &set2), AX_OK);
	cr_assert_eq(ax_dag_from_json(set2, j, &back), AX_OK, "%s",
	             ax_err_detail());
	check_model(back);
	free(text);
	json_decref(j);
	ax_dagset_free(set2);
	ax_dagset_free(set);
}

Test(dag_env, a_dag_without_them_keeps_its_json_and_hash)
{
	ax_err     rv, vr;
	ax_dagset *set = load("kind: DAG\nname: t\ntasks:\n"
	                      "  - {name: a, command: x, env: {A: b}}\n",
	                      &rv, &vr);
	cr_assert_eq(vr, AX_OK);
	json_t *j    = ax_dag_to_json(set->dags[0]);
	char   *text = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
	cr_assert_null(strstr(text, "run_as"), "%s", text);
	cr_assert_not_null(strstr(text, "\"env\":{\"A\":\"b\"}"), "%s", text);
	free(text);
	json_decref(j);
	ax_dagset_free(set);
}

struct bad {
	char yaml[200];
	char want[300];
};

ParameterizedTestParameters(dag_env, bad_forms_are_refused_with_their_place)
{
	static struct bad cases[] = {
		{ "    env: {P: {from_file: etc/pg}}\n",
		  "t.yaml:5:26: error: env P: from_file 'etc/pg' must be an "
		  "absolute path" },
		{ "    env: {P: {from_file: /a, from_env: B}}\n",
		  "t.yaml:5:14: error: env P: write exactly one of "
		  "{from_file: "
		  "PATH} and {from_env: NAME}" },
		{ "    env: {P: {}}\n", "error: env P: write exactly one of" },
		{ "    env: {P: {from_files: /a}}\n",
		  "unknown key 'from_files' in an env source; did you mean "
		  "'from_file'?" },
		{ "    env: {P: {from_env: \"A B\"}}\n",
		  "env P: from_env 'A B' is not a variable name" },
		{ "    env: {P: [a]}\n",
		  "env.P must be a string, a number, {from_file: PATH} or "
		  "{from_env: NAME}, got a list" },
		{ "    run_as: \"root; rm\"\n",
		  "t.yaml:5:14: error: run_as 'root; rm' is not a user name" },
		{ "    run_as: [root]\n", "run_as" },
	};
	return cr_make_param_array(struct bad, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct bad *b, dag_env,
                  bad_forms_are_refused_with_their_place)
{
	char   text[512], *buf = NULL;
	size_t len = 0;
	ax_err rv, vr;
	FILE  *f = open_memstream(&buf, &len);
	/* the case's line is line 5 */
	snprintf(text, sizeof(text),
	         "kind: DAG\nname: t\ntasks:\n  - command: x\n%s"
	         "    name: a\n",
	         b->yaml);
	ax_dagset *set = load(text, &rv, &vr);
	cr_assert(rv != AX_OK || vr != AX_OK, "accepted:\n%s", text);
	ax_dagset_print_diags(set, f);
	fclose(f);
	cr_assert_not_null(strstr(buf, b->want), "got:\n%s\nwant: %s", buf,
	                   b->want);
	free(buf);
	ax_dagset_free(set);
}
