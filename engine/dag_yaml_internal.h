/*
 * dag_yaml_internal.h - what the DAG YAML loader's files share and no
 * other module uses. Include it from engine/dag_yaml*.c only.
 *
 * Role: dag_yaml_node.c reads libyaml's tree: positions, mappings (with
 * `<<` merges, duplicate and unknown keys reported) and typed values
 * (string, integer, boolean, enum, duration, lists, name/value maps);
 * dag_yaml_scan.c streams a file once before it is loaded, for its
 * limits and syntax; dag_yaml.c walks the DAG and TaskTemplate schema
 * with them (dag_yaml.h).
 *
 * Invariants: positions are 1-based; every string handed out is an arena
 * copy of a whole scalar of the set (yl_prescan refused every file with
 * a scalar that decodes to a NUL); every error is recorded in the set
 * (ERR) with the position of the node at fault.
 */
#ifndef AX_DAG_YAML_INTERNAL_H
#define AX_DAG_YAML_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include "dag.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* One file being loaded; doc is the document being walked. */
typedef struct ld {
	ax_dagset       *set;
	const char      *file; /* arena copy */
	const char      *src;
	size_t           len;
	yaml_document_t *doc;
} ld;

typedef struct kvp {
	yaml_node_t *k, *v;
} kvp;

/* The pairs of one mapping after `<<` merges (malloc'd). */
typedef struct map {
	kvp   *p;
	size_t n, cap;
	ax_pos pos;
} map;

#define ERR(l, pos, ...) ax_dagset_error((l)->set, (pos), __VA_ARGS__)

/* --- positions and nodes (dag_yaml_node.c) --- */

ax_pos yl_mark_pos(const ld *l, yaml_mark_t m);
/* Position of a node's value: after the quote, or the first content line
 * of a block scalar. */
ax_pos       yl_node_pos(const ld *l, const yaml_node_t *n);
yaml_node_t *yl_node(const ld *l, int idx);
/* "a mapping", "a list" or "a scalar", for messages. */
const char *yl_what(const yaml_node_t *n);
const char *yl_sval(const yaml_node_t *n);
/* NULL, or a plain empty, ~ or null scalar. */
int yl_is_null(const yaml_node_t *n);
/* An arena copy of scalar n, whole. */
char *yl_adup(const ld *l, const yaml_node_t *n);

/* --- mappings --- */

/*
 * Collects the pairs of mapping node n into m: explicit keys first (a
 * repeated key is an error), then keys from `<<` merges that are not
 * already there. Returns -1 when n is not a mapping (reported as "expected
 * a mapping" for `ctx`). yl_map_fini frees m.
 */
int  yl_map_load(ld *l, yaml_node_t *n, const char *ctx, map *m);
void yl_map_fini(map *m);
/* Reports every key of m that is not in allowed, with a did-you-mean. */
void yl_check_keys(ld *l, const map *m, const char *const *allowed, size_t n,
                   const char *ctx);

/* --- typed getters: 0 absent (or null), 1 set, -1 reported error --- */

yaml_node_t *yl_get(const map *m, const char *key);
int yl_want_scalar(ld *l, yaml_node_t *v, const char *key, const char *type);
int yl_get_str(ld *l, const map *m, const char *key, const char **out,
               ax_pos *pos);
/* A whole decimal integer: 0, else -1 (nothing reported). */
int yl_parse_int(const char *s, long long *out);
int yl_get_int(ld *l, const map *m, const char *key, long long min,
               long long max, int *out);
int yl_get_bool(ld *l, const map *m, const char *key, int *out);
/* Enum value, matched without regard to case; names[i] maps to i. */
int yl_get_enum(ld *l, const map *m, const char *key, const char *const *names,
                size_t n, int *out);
int yl_get_duration(ld *l, const map *m, const char *key, int64_t min_us,
                    int64_t max_us, int64_t *out);
/* A list of scalars (tags, depends_on); pos may be NULL. */
int yl_get_str_list(ld *l, const map *m, const char *key, const char ***out,
                    ax_pos **pos, size_t *n);
/* A mapping of names to scalar values (params, env). */
int yl_get_kvs(ld *l, const map *m, const char *key, ax_kvs *out);

/* --- the pre-pass (dag_yaml_scan.c) --- */

/* Records libyaml's error of p: AX_EPARSE, or AX_ENOMEM. */
ax_err yl_syntax_error(ld *l, yaml_parser_t *p);
/*
 * Streams the events of the whole file once. Returns AX_OK when the file
 * is within the set's limits and well-formed, else the recorded error's
 * code. Every scalar that holds a NUL is reported (AX_EPARSE), so no
 * document of the file is loaded.
 */
ax_err yl_prescan(ld *l);

#endif /* AX_DAG_YAML_INTERNAL_H */
