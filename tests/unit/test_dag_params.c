/*
 * Params declarations (dag_yaml.c, dag_validate.c, dag.c JSON form) and
 * the check of the params a trigger or backfill gives (dag_params.c):
 * plain `name: default` keeps working, declared types and patterns are
 * enforced with the key and the expectation in the message, an unknown
 * key lists the declared ones.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dag.h"
#include "dag_params.h"
#include "dag_validate.h"
#include "dag_yaml.h"

static const char *decl_yaml =
    "kind: DAG\n"
    "name: p\n"
    "params:\n"
    "  table: ods.orders\n"
    "  region: {default: eu, pattern: '[a-z]{2}'}\n"
    "  shards: {default: 4, type: integer}\n"
    "  ratio: {default: 0.5, type: number}\n"
    "  full: {default: false, type: boolean}\n"
    "  day: {default: \"{{ ds }}\", type: string, description: d}\n"
    "tasks:\n"
    "  - {name: a, command: \"echo {{ params.region }}\",\n"
    "     params: {local: x}}\n";

/* Loads and validates text; returns the set (diagnostics in *diags). */
static ax_dagset *
load(const char *text, char **diags)
{
	ax_dagset *set;
	size_t     len = 0;
	FILE      *f   = open_memstream(diags, &len);

	cr_assert_eq(ax_dagset_new(NULL, &set), AX_OK);
	ax_dag_yaml_load_buf(set, "t.yaml", text, strlen(text));
	ax_dagset_validate(set);
	ax_dagset_print_diags(set, f);
	fclose(f);
	return set;
}

Test(dag_params, declarations_parse_and_round_trip)
{
	char      *diags = NULL;
	ax_dagset *set   = load(decl_yaml, &diags);
	cr_assert_str_eq(diags, "");
	free(diags);
	ax_dag *d = set->dags[0];
	cr_assert(d->valid);
	cr_assert_not_null(d->param_decls);
	cr_assert_eq(d->params.n, 6);
	cr_assert_str_eq(d->params.v[1].value, "eu");
	cr_assert_eq(d->param_decls[0].type, AX_PT_TEXT);
	cr_assert_null(d->param_decls[0].pattern);
	cr_assert_str_eq(d->param_decls[1].pattern, "[a-z]{2}");
	cr_assert_eq(d->param_decls[2].type, AX_PT_INTEGER);
	cr_assert_str_eq(d->params.v[2].value, "4");
	cr_assert_eq(d->param_decls[3].type, AX_PT_NUMBER);
	cr_assert_eq(d->param_decls[4].type, AX_PT_BOOLEAN);
	cr_assert_eq(d->param_decls[5].type, AX_PT_STRING);
	cr_assert_str_eq(d->params.v[5].value, "{{ ds }}");

	/* the stored JSON form keeps them, and reads back the same */
	json_t *j = ax_dag_to_json(d);
	cr_assert_not_null(json_object_get(j, "param_types"));
	cr_assert_null(
	    json_object_get(json_object_get(j, "param_types"), "table"));
	ax_dagset *set2;
	ax_dag    *d2;
	cr_assert_eq(ax_dagset_new(NULL, &set2), AX_OK);
	cr_assert_eq(ax_dag_from_json(set2, j, &d2), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_str_eq(d2->hash, d->hash);
	cr_assert_eq(d2->param_decls[2].type, AX_PT_INTEGER);
	cr_assert_str_eq(d2->param_decls[1].pattern, "[a-z]{2}");
	json_decref(j);
	ax_dagset_free(set2);
	ax_dagset_free(set);
}

Test(dag_params, plain_params_keep_their_json_form)
{
	char      *diags = NULL;
	ax_dagset *set   = load("kind: DAG\nname: q\nparams: {a: 1, b: x}\n"
	                          "tasks:\n  - {name: t, command: echo}\n",
	                        &diags);
	cr_assert_str_eq(diags, "");
	free(diags);
	cr_assert_null(set->dags[0]->param_decls);
	json_t *j = ax_dag_to_json(set->dags[0]);
	cr_assert_null(json_object_get(j, "param_types"),
	               "no new key: content hashes of existing DAGs stay");
	json_decref(j);
	ax_dagset_free(set);
}

struct ycase {
	char yaml[200]; /* the params: block */
	char want[300];
};

ParameterizedTestParameters(dag_params, declaration_errors)
{
	static struct ycase cases[] = {
		{ "  n: {default: 1, type: int}\n",
		  "t.yaml:4:25: error: unknown type 'int' of params.n; "
		  "expected one of: string, integer, number, boolean" },
		{ "  n: {default: 'a', pattern: '[a-'}\n",
		  "t.yaml:4:31: error: params.n: pattern '[a-' is not a POSIX "
		  "extended regular expression: " },
		{ "  n: {default: x1, type: integer}\n",
		  "t.yaml:4:16: error: params.n: the default 'x1' does not "
		  "fit "
		  "its declaration: expected an integer" },
		{ "  n: {default: AB, pattern: '[a-z]+'}\n",
		  "t.yaml:4:16: error: params.n: the default 'AB' does not "
		  "fit "
		  "its declaration: expected text matching the pattern "
		  "'[a-z]+'" },
		{ "  n: {default: 1, typ: integer}\n",
		  "t.yaml:4:19: error: unknown key 'typ' in params.n; did you "
		  "mean 'type'?" },
		{ "  n: [1, 2]\n",
		  "t.yaml:4:6: error: params.n must be a value or a mapping "
		  "{default, type, pattern}, got a list" },
	};
	return cr_make_param_array(struct ycase, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct ycase *c, dag_params, declaration_errors)
{
	char  text[600];
	char *diags = NULL;
	snprintf(text, sizeof(text),
	         "kind: DAG\nname: e\nparams:\n%stasks:\n"
	         "  - {name: t, command: echo}\n",
	         c->yaml);
	ax_dagset_free(load(text, &diags));
	cr_assert(strncmp(diags, c->want, strlen(c->want)) == 0,
	          "got:  %s\nwant: %s", diags, c->want);
	free(diags);
}

struct pcase {
	char json[120];
	int  ok;
	char key[16];
	char msg[160]; /* a part of the message */
};

ParameterizedTestParameters(dag_params, given_params)
{
	static struct pcase cases[] = {
		{ "{}", 1, "", "" },
		{ "{\"table\": \"x; rm -rf /\", \"local\": \"y\"}", 1, "",
		  "" },
		{ "{\"table\": 5, \"full\": true}", 1, "", "" },
		{ "{\"shards\": \"-12\", \"ratio\": \"1e3\"}", 1, "", "" },
		{ "{\"shards\": 7, \"ratio\": 2.5, \"full\": \"false\"}", 1,
		  "", "" },
		{ "{\"region\": \"us\"}", 1, "", "" },
		{ "{\"regoin\": \"us\"}", 0, "regoin",
		  "unknown param 'regoin' for DAG 'p'; declared: table, "
		  "region, shards, ratio, full, day, local" },
		{ "{\"shards\": \"4; id\"}", 0, "shards",
		  "param 'shards' of DAG 'p': expected an integer" },
		{ "{\"shards\": 2.5}", 0, "shards", "expected an integer" },
		{ "{\"shards\": \"99999999999999999999\"}", 0, "shards",
		  "expected an integer" },
		{ "{\"ratio\": \"nan\"}", 0, "ratio", "expected a number" },
		{ "{\"ratio\": \"0x10\"}", 0, "ratio", "expected a number" },
		{ "{\"full\": \"yes\"}", 0, "full", "expected true or false" },
		{ "{\"region\": \"usa\"}", 0, "region",
		  "expected text matching the pattern '[a-z]{2}'" },
		{ "{\"region\": \"us; id\"}", 0, "region", "pattern" },
		{ "{\"day\": 5}", 0, "day", "expected a string" },
		{ "{\"table\": {\"a\": 1}}", 0, "table",
		  "expected a string, number or boolean, got an object" },
		{ "{\"table\": null}", 0, "table", "got null" },
		{ "{\"table\": \"a\\u0000b\"}", 0, "table", "NUL byte" },
	};
	return cr_make_param_array(struct pcase, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct pcase *c, dag_params, given_params)
{
	char       *diags = NULL, msg[512] = "";
	const char *bad = NULL;
	ax_dagset  *set = load(decl_yaml, &diags);
	free(diags);
	json_t *j = json_loads(c->json, JSON_ALLOW_NUL, NULL);
	cr_assert_not_null(j, "%s", c->json);
	ax_err rv =
	    ax_dag_params_check(set->dags[0], j, msg, sizeof(msg), &bad);
	if (c->ok) {
		cr_assert_eq(rv, AX_OK, "%s: %s", c->json, msg);
	} else {
		cr_assert_eq(rv, AX_EINVAL, "%s accepted", c->json);
		cr_assert_str_eq(bad, c->key);
		cr_assert(strstr(msg, c->msg) != NULL, "%s: got '%s'", c->json,
		          msg);
	}
	json_decref(j);
	ax_dagset_free(set);
}
