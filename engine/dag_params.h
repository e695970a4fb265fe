/*
 * dag_params.h - params declarations: types, patterns, and the check of
 * the params a trigger or a backfill gives.
 *
 * Role: a DAG declares its params (`params:` in dag_yaml.c; a plain
 * `name: default`, or `name: {default, type, pattern}`). A trigger or
 * backfill may only set declared params, with values of the declared
 * type matching the declared pattern. The API checks each request
 * (answering 422), axd checks again when it applies a trigger command
 * (rejecting it), and the renderer checks the conf of every run it
 * renders, so a value that got around the API still never runs.
 * The declared names are the DAG's params and every task's params.
 *
 * Invariants: pure functions, no global state, thread-safe.
 * Workload: a few params per request.
 */
#ifndef AX_DAG_PARAMS_H
#define AX_DAG_PARAMS_H

#include <jansson.h>
#include <stddef.h>

#include "dag.h"

/* "string", "integer", "number", "boolean" ("text" for AX_PT_TEXT). */
const char *ax_param_type_name(ax_param_type t);

/* Parses a type name (as in YAML); -1 when it is none of the four. */
int ax_param_type_parse(const char *name, ax_param_type *out);

/*
 * Checks the text form of a value against a declaration (pd NULL: no
 * declaration, any text). Returns 0, or -1 with why (cap bytes) saying
 * what was expected, e.g. "an integer" or "text matching ^[a-z]+$".
 * pattern must compile (validation makes sure it does).
 */
int ax_param_text_check(const ax_param_decl *pd, const char *text, char *why,
                        size_t cap);

/*
 * Checks that the POSIX ERE pattern compiles; -1 with why when not.
 */
int ax_param_pattern_check(const char *pattern, char *why, size_t cap);

/*
 * The text form of a JSON param value into *out (malloc'd): a string as
 * it is, a number or boolean as JSON writes it. -1 with why for null,
 * objects, arrays and strings holding a NUL byte.
 */
int ax_param_json_text(const json_t *v, char **out, char *why, size_t cap);

/*
 * The names a trigger may set (the DAG's params, then its tasks' params
 * not listed yet), each once, into names[0..cap); returns how many there
 * are (may exceed cap). Pointers borrow from d.
 */
size_t ax_dag_param_names(const ax_dag *d, const char **names, size_t cap);

/*
 * Checks params (a JSON object, NULL: none) against the declarations of
 * d. On AX_EINVAL, msg (cap bytes) names the first bad key and what was
 * expected: an unknown key lists the declared ones ("unknown param
 * 'regoin' for DAG 'x'; declared: region, day"), a bad value gives the
 * declared type or pattern. *bad_key (may be NULL) receives a pointer
 * to the key inside params.
 */
ax_err ax_dag_params_check(const ax_dag *d, const json_t *params, char *msg,
                           size_t cap, const char **bad_key);

#endif /* AX_DAG_PARAMS_H */
