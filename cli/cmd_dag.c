/*
 * cmd_dag.c - `axctl dag`: validate DAG files, load a folder into the
 * database, print the JSON form.
 *
 * Role: the command-line face of dag_yaml / dag_validate / dag_store. A
 * folder loader elsewhere (standalone, the DAG loader actor) does the same
 * three steps: ax_dag_yaml_load_file per file, ax_dagset_validate once,
 * ax_dag_store_submit[_template] per valid DAG and template.
 * Errors go to stderr as FILE:LINE:COL: error: MESSAGE, sorted by file and
 * position; `validate` also warns (FILE:LINE:COL: warning: ...) about
 * every `| raw` filter, a value written into a command unquoted. Exit status:
 * 0 all valid (and stored), 1 any error, 2 usage.
 */
#include "cmd_dag.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_db.h"
#include "engine/control.h"
#include "dag.h"
#include "dag_store.h"
#include "dag_validate.h"
#include "dag_yaml.h"
#include "log.h"
#include "store.h"

static void
usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: axctl dag validate FILE...\n"
	    "       axctl dag json FILE...\n"
	    "       axctl dag load [--home DIR] [--dsn DSN] DIR\n"
	    "\n"
	    "  validate  check DAG / TaskTemplate YAML files (together, so a\n"
	    "            DAG may use a template from another file); errors\n"
	    "            on stderr as FILE:LINE:COL: error: MESSAGE\n"
	    "  json      validate, then print the parsed DAGs as JSON\n"
	    "  load      validate every *.yaml / *.yml in DIR and store each\n"
	    "            valid DAG and template as a new version when its\n"
	    "            content changed (created / unchanged / updated)\n"
	    "  --home, --dsn  the database, as for `axctl db`\n"
	    "\n"
	    "Exit status: 0 all valid, 1 any error, 2 usage error.\n"
	    "Format: docs/dag-format.md\n");
}

/* Loads and validates files[0..n) into *out; 0 when all are valid. */
static int
load_files(char **files, int n, ax_dagset **out)
{
	ax_dagset *set;
	ax_err     rv;

	if ((rv = ax_dagset_new(NULL, &set)) != AX_OK) {
		fprintf(stderr, "axctl dag: %s\n", ax_err_detail());
		return -1;
	}
	for (int i = 0; i < n; i++) {
		rv = ax_dag_yaml_load_file(set, files[i]);
		if (rv == AX_ENOMEM) {
			fprintf(stderr, "axctl dag: %s\n", ax_err_detail());
			ax_dagset_free(set);
			return -1;
		}
	}
	rv   = ax_dagset_validate(set);
	*out = set;
	ax_dagset_print_diags(set, stderr);
	return rv == AX_OK ? 0 : 1;
}

/* FILE:LINE:COL: warning: ... for one `| raw` use. */
static void
print_raw(void *arg, ax_pos pos, const char *what)
{
	size_t *n = arg;
	fprintf(stderr,
	        "%s:%u:%u: warning: %s; a trigger param can then run shell "
	        "code, use it only for text the DAG author controls\n",
	        pos.file ? pos.file : "?", pos.line, pos.col, what);
	(*n)++;
}

static int
cmd_validate(char **files, int n)
{
	ax_dagset *set  = NULL;
	int        r    = load_files(files, n, &set);
	size_t     nraw = 0;

	if (r < 0)
		return 1;
	ax_dagset_raw_uses(set, print_raw, &nraw);
	if (r == 0)
		printf("ok: %zu DAG%s, %zu template%s in %d file%s\n",
		       set->n_dags, set->n_dags == 1 ? "" : "s",
		       set->n_templates, set->n_templates == 1 ? "" : "s", n,
		       n == 1 ? "" : "s");
	else
		fprintf(stderr, "%zu error%s\n",
		        ax_dagset_error_count(set, NULL),
		        ax_dagset_error_count(set, NULL) == 1 ? "" : "s");
	ax_dagset_free(set);
	return r == 0 ? 0 : 1;
}

static int
cmd_json(char **files, int n)
{
	ax_dagset *set = NULL;
	int        r   = load_files(files, n, &set);
	json_t    *arr = json_array();

	if (r < 0 || arr == NULL) {
		ax_dagset_free(set);
		json_decref(arr);
		return 1;
	}
	for (size_t i = 0; i < set->n_templates; i++)
		if (set->templates[i]->valid)
			json_array_append_new(
			    arr, ax_template_to_json(set->templates[i]));
	for (size_t i = 0; i < set->n_dags; i++) {
		ax_dag *d = set->dags[i];
		if (!d->valid)
			continue;
		json_t *j = ax_dag_to_json(d);
		if (j != NULL)
			json_object_set_new(j, "content_hash",
			                    json_string(d->hash));
		json_array_append_new(arr, j);
	}
	json_dumpf(arr, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
	printf("\n");
	json_decref(arr);
	ax_dagset_free(set);
	return r == 0 ? 0 : 1;
}

static int
is_yaml(const char *name)
{
	size_t n = strlen(name);
	if (name[0] == '.')
		return 0;
	return (n > 5 && strcmp(name + n - 5, ".yaml") == 0) ||
	    (n > 4 && strcmp(name + n - 4, ".yml") == 0);
}

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The *.yaml / *.yml files of dir, sorted (malloc'd; free each + array). */
static int
list_dir(const char *dir, char ***out, int *n)
{
	DIR           *d = opendir(dir);
	struct dirent *e;
	char         **v   = NULL;
	int            cap = 0;

	*n = 0;
	if (d == NULL) {
		fprintf(stderr,
		        "axctl dag load: cannot open folder '%s': %s\n", dir,
		        strerror(errno));
		return -1;
	}
	while ((e = readdir(d)) != NULL) {
		if (!is_yaml(e->d_name))
			continue;
		if (*n == cap) {
			cap       = cap ? cap * 2 : 32;
			char **nv = realloc(v, (size_t) cap * sizeof(char *));
			if (nv == NULL)
				break;
			v = nv;
		}
		size_t len = strlen(dir) + strlen(e->d_name) + 2;
		if ((v[*n] = malloc(len)) == NULL)
			break;
		snprintf(v[*n], len, "%s/%s", dir, e->d_name);
		(*n)++;
	}
	closedir(d);
	if (*n > 0)
		qsort(v, (size_t) *n, sizeof(char *), name_cmp);
	*out = v;
	return 0;
}

/*
 * Tells a running axd that dag_name has a new version (control.h
 * dag_changed). The version is committed already, so a lost notification
 * costs only latency: axd reloads everything when it (re)connects.
 */
static int
notify_changed(ax_store *s, const char *dag_name)
{
	json_t *n =
	    json_pack("{s:s,s:s}", "op", "dag_changed", "dag", dag_name);
	char  *text = n ? json_dumps(n, JSON_COMPACT) : NULL;
	ax_err rv   = text ? ax_control_notify(s, text)
	                   : ax_err_set(AX_ENOMEM, "control payload");

	free(text);
	json_decref(n);
	if (rv != AX_OK) {
		fprintf(stderr, "axctl dag load: notifying axd of %s: %s\n",
		        dag_name, ax_err_detail());
		return 1;
	}
	return 0;
}

static int
store_set(ax_store *s, ax_dagset *set)
{
	ax_dag_store_result res;
	int                 failed = 0;
	ax_err              rv;

	for (size_t i = 0; i < set->n_templates; i++) {
		ax_task_template *t = set->templates[i];
		if (!t->valid || t->name == NULL)
			continue;
		rv = ax_dag_store_submit_template(s, t, t->pos.file, &res);
		if (rv != AX_OK) {
			fprintf(stderr, "axctl dag load: %s\n",
			        ax_err_detail());
			failed = 1;
			continue;
		}
		printf("template %-40s %-9s v%d\n", t->name,
		       ax_dag_store_outcome_name(res.outcome), res.version);
	}
	for (size_t i = 0; i < set->n_dags; i++) {
		ax_dag *d = set->dags[i];
		if (!d->valid || d->name == NULL) {
			if (d->name != NULL)
				printf("dag      %-40s %-9s (has errors)\n",
				       d->name, "skipped");
			continue;
		}
		rv = ax_dag_store_submit(s, d, d->pos.file, &res);
		if (rv != AX_OK) {
			fprintf(stderr, "axctl dag load: %s\n",
			        ax_err_detail());
			if (strstr(ax_err_detail(), "does not exist") != NULL)
				fprintf(stderr,
				        "hint: is the schema migrated? run "
				        "`axctl db migrate`\n");
			failed = 1;
			continue;
		}
		printf("dag      %-40s %-9s v%d\n", d->name,
		       ax_dag_store_outcome_name(res.outcome), res.version);
		if (res.outcome != AX_DAG_UNCHANGED &&
		    notify_changed(s, d->name) != 0)
			failed = 1;
	}
	return failed;
}

int
ax_dag_load_dir(const char *dir, const char *home, const char *dsn)
{
	char      **files = NULL;
	int         n     = 0, r, failed;
	ax_dagset  *set   = NULL;
	ax_db_where w;
	ax_store   *s = NULL;
	ax_err      rv;

	if (list_dir(dir, &files, &n) != 0)
		return 1;
	if (n == 0)
		fprintf(stderr,
		        "axctl dag load: no *.yaml or *.yml file in "
		        "'%s'\n",
		        dir);
	r = load_files(files, n, &set);
	for (int i = 0; i < n; i++)
		free(files[i]);
	free(files);
	if (r < 0)
		return 1;
	memset(&w, 0, sizeof(w));
	if ((rv = ax_db_where_init(&w, home, dsn)) != AX_OK ||
	    (rv = ax_db_where_up(&w)) != AX_OK ||
	    (rv = ax_store_open(w.dsn, &s)) != AX_OK) {
		fprintf(stderr, "axctl dag load: %s\n", ax_err_detail());
		ax_db_where_fini(&w);
		ax_dagset_free(set);
		return 1;
	}
	failed = store_set(s, set);
	ax_store_close(s);
	ax_db_where_fini(&w);
	if (r != 0)
		fprintf(stderr, "%zu error%s\n",
		        ax_dagset_error_count(set, NULL),
		        ax_dagset_error_count(set, NULL) == 1 ? "" : "s");
	ax_dagset_free(set);
	return (r != 0 || failed || n == 0) ? 1 : 0;
}

int
ax_cmd_dag(int argc, char **argv)
{
	const char *home = NULL, *dsn = NULL, *sub = NULL;
	char      **args  = calloc((size_t) argc + 1, sizeof(char *));
	int         nargs = 0, i = 1, rc;

	if (args == NULL)
		return 1;
	while (i < argc) {
		int r = ax_db_where_opt(argc, argv, &i, &home, &dsn);
		if (r < 0) {
			free(args);
			return 2;
		}
		if (r > 0)
			continue;
		const char *a = argv[i++];
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			free(args);
			return 0;
		}
		if (a[0] == '-' && a[1] != '\0') {
			fprintf(
			    stderr,
			    "axctl dag: unknown option '%s'; run `axctl dag "
			    "--help`\n",
			    a);
			free(args);
			return 2;
		}
		if (sub == NULL)
			sub = a;
		else
			args[nargs++] = (char *) a;
	}
	ax_log_init(AX_LOG_WARN, 2);
	if (sub != NULL &&
	    (strcmp(sub, "validate") == 0 || strcmp(sub, "json") == 0)) {
		if (nargs == 0 || home != NULL || dsn != NULL) {
			fprintf(stderr, "axctl dag %s: %s\n", sub,
			        nargs == 0
			            ? "name at least one FILE"
			            : "--home/--dsn only apply to load");
			free(args);
			return 2;
		}
		rc = sub[0] == 'v' ? cmd_validate(args, nargs)
		                   : cmd_json(args, nargs);
	} else if (sub != NULL && strcmp(sub, "load") == 0) {
		if (nargs != 1) {
			fprintf(stderr,
			        "axctl dag load: name exactly one DIR\n");
			free(args);
			return 2;
		}
		rc = ax_dag_load_dir(args[0], home, dsn);
	} else {
		if (sub != NULL)
			fprintf(stderr,
			        "axctl dag: unknown command '%s'; expected "
			        "validate, json or load\n",
			        sub);
		else
			usage(stderr);
		rc = 2;
	}
	free(args);
	return rc;
}
