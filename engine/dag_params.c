/*
 * dag_params.c - params declarations and the check of given params.
 *
 * Role: see dag_params.h. A pattern is a POSIX ERE (regcomp) that the
 * whole value must match: it is compiled as ^(PATTERN)$, so `[a-z]+`
 * does not accept "eu; id". Compiled per check: a check is a few params
 * per trigger or per rendered attempt, microseconds each.
 */
#include "dag_params.h"

#include <errno.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const type_names[] = { "text", "string", "integer",
	                                  "number", "boolean" };

const char *
ax_param_type_name(ax_param_type t)
{
	return (unsigned) t < 5 ? type_names[t] : "?";
}

int
ax_param_type_parse(const char *name, ax_param_type *out)
{
	for (int i = 0; i < 5; i++) /* "text": the plain default's type */
		if (strcmp(name, type_names[i]) == 0) {
			*out = (ax_param_type) i;
			return 0;
		}
	return -1;
}

/* Compiles ^(pattern)$; 0 or the regcomp error. */
static int
compile(const char *pattern, regex_t *re)
{
	size_t n    = strlen(pattern) + 5;
	char  *full = malloc(n);
	int    rc;

	if (full == NULL)
		return REG_ESPACE;
	snprintf(full, n, "^(%s)$", pattern);
	rc = regcomp(re, full, REG_EXTENDED | REG_NOSUB);
	free(full);
	return rc;
}

int
ax_param_pattern_check(const char *pattern, char *why, size_t cap)
{
	regex_t re;
	int     rc = compile(pattern, &re);

	if (rc == 0) {
		regfree(&re);
		return 0;
	}
	char err[160];
	regerror(rc, &re, err, sizeof(err));
	snprintf(why, cap,
	         "pattern '%s' is not a POSIX extended regular "
	         "expression: %s",
	         pattern, err);
	return -1;
}

static int
is_integer(const char *s)
{
	char *e;
	if (*s == '\0' || strchr(" \t\n", *s) != NULL)
		return 0;
	errno = 0;
	(void) strtoll(s, &e, 10);
	return errno == 0 && *e == '\0';
}

static int
is_number(const char *s)
{
	char *e;
	if (*s == '\0' || strchr(" \t\n", *s) != NULL)
		return 0;
	errno    = 0;
	double x = strtod(s, &e);
	return errno == 0 && *e == '\0' && isfinite(x) &&
	    strpbrk(s, "xXpP") == NULL; /* no hex floats */
}

int
ax_param_text_check(const ax_param_decl *pd, const char *text, char *why,
                    size_t cap)
{
	if (pd == NULL)
		return 0;
	if ((pd->type == AX_PT_INTEGER && !is_integer(text)) ||
	    (pd->type == AX_PT_NUMBER && !is_number(text)) ||
	    (pd->type == AX_PT_BOOLEAN && strcmp(text, "true") != 0 &&
	     strcmp(text, "false") != 0)) {
		snprintf(why, cap, "expected %s",
		         pd->type == AX_PT_INTEGER      ? "an integer"
		             : pd->type == AX_PT_NUMBER ? "a number"
		                                        : "true or false");
		return -1;
	}
	if (pd->pattern == NULL)
		return 0;
	regex_t re;
	if (compile(pd->pattern, &re) != 0) {
		snprintf(why, cap, "pattern '%s' does not compile",
		         pd->pattern);
		return -1;
	}
	int rc = regexec(&re, text, 0, NULL, 0);
	regfree(&re);
	if (rc != 0) {
		snprintf(why, cap, "expected text matching the pattern '%s'",
		         pd->pattern);
		return -1;
	}
	return 0;
}

int
ax_param_json_text(const json_t *v, char **out, char *why, size_t cap)
{
	*out = NULL;
	if (json_is_string(v)) {
		if (strlen(json_string_value(v)) != json_string_length(v)) {
			snprintf(why, cap, "the value holds a NUL byte");
			return -1;
		}
		*out = strdup(json_string_value(v));
	} else if (json_is_number(v) || json_is_boolean(v)) {
		*out = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
	} else {
		snprintf(why, cap,
		         "expected a string, number or boolean, "
		         "got %s",
		         json_is_null(v)        ? "null"
		             : json_is_array(v) ? "an array"
		                                : "an object");
		return -1;
	}
	if (*out == NULL) {
		snprintf(why, cap, "out of memory");
		return -1;
	}
	return 0;
}

/* Index of name in d->params, or -1. */
static long
dag_param(const ax_dag *d, const char *name)
{
	for (size_t i = 0; i < d->params.n; i++)
		if (strcmp(d->params.v[i].key, name) == 0)
			return (long) i;
	return -1;
}

static int
listed(const char *const *names, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(names[i], key) == 0)
			return 1;
	return 0;
}

size_t
ax_dag_param_names(const ax_dag *d, const char **names, size_t cap)
{
	size_t n = 0;
	for (size_t i = 0; i < d->params.n; i++)
		if (!listed(names, n < cap ? n : cap, d->params.v[i].key) &&
		    n++ < cap)
			names[n - 1] = d->params.v[i].key;
	for (size_t t = 0; t < d->n_tasks; t++) {
		const ax_kvs *k = &d->tasks[t].eff.params;
		for (size_t i = 0; i < k->n; i++)
			if (!listed(names, n < cap ? n : cap, k->v[i].key) &&
			    n++ < cap)
				names[n - 1] = k->v[i].key;
	}
	return n;
}

/* "a, b, c" of every declared name, into buf. */
static void
declared_list(const ax_dag *d, char *buf, size_t cap)
{
	const char *names[256];
	size_t      n = ax_dag_param_names(d, names, 256), k = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && i < 256 && k + 1 < cap; i++)
		k += (size_t) snprintf(buf + k, cap - k, "%s%s", i ? ", " : "",
		                       names[i]);
	if (n == 0)
		snprintf(buf, cap, "none (the DAG declares no params)");
}

static int
task_param(const ax_dag *d, const char *name)
{
	for (size_t t = 0; t < d->n_tasks; t++) {
		const ax_kvs *k = &d->tasks[t].eff.params;
		for (size_t i = 0; i < k->n; i++)
			if (strcmp(k->v[i].key, name) == 0)
				return 1;
	}
	return 0;
}

ax_err
ax_dag_params_check(const ax_dag *d, const json_t *params, char *msg,
                    size_t cap, const char **bad_key)
{
	const char *k;
	json_t     *v;
	char        why[256], list[512];

	if (bad_key != NULL)
		*bad_key = NULL;
	if (params == NULL || json_is_null(params))
		return AX_OK;
	if (!json_is_object(params)) {
		snprintf(msg, cap, "'params' must be a JSON object");
		return ax_err_set(AX_EINVAL, "%s", msg);
	}
	json_object_foreach((json_t *) params, k, v)
	{
		long  i = dag_param(d, k);
		char *text;
		if (i < 0 && !task_param(d, k)) {
			declared_list(d, list, sizeof(list));
			snprintf(
			    msg, cap,
			    "unknown param '%s' for DAG '%s'; declared: %s", k,
			    d->name, list);
			if (bad_key != NULL)
				*bad_key = k;
			return ax_err_set(AX_EINVAL, "%s", msg);
		}
		const ax_param_decl *pd = i >= 0 && d->param_decls != NULL
		    ? &d->param_decls[i]
		    : NULL;
		int bad = ax_param_json_text(v, &text, why, sizeof(why)) != 0;
		if (!bad && pd != NULL && pd->type == AX_PT_STRING &&
		    !json_is_string(v)) {
			snprintf(why, sizeof(why), "expected a string");
			bad = 1;
		}
		if (!bad)
			bad = ax_param_text_check(pd, text, why, sizeof(why));
		free(text);
		if (bad) {
			snprintf(msg, cap, "param '%s' of DAG '%s': %s", k,
			         d->name, why);
			if (bad_key != NULL)
				*bad_key = k;
			return ax_err_set(AX_EINVAL, "%s", msg);
		}
	}
	return AX_OK;
}
