/*
 * dag.h - the in-memory model of DAGs and task templates (DESIGN.md 3).
 *
 * Role: dag_yaml.c builds it from YAML, dag_validate.c checks it, the DAG
 * loader stores it (dag_store.c) and hands it to the time and dependency
 * detectors; ax_dag_to_json() is the form stored as jsonb and served by
 * the API.
 *
 * Ownership: everything hangs off one ax_dagset, the result of loading a
 * set of files (one `axctl dag validate` call, one folder). All strings,
 * arrays, DAGs, templates and diagnostics live in the set's arena and are
 * released together by ax_dagset_free(). Pointers into a set are valid
 * until then. A set is used by one thread at a time.
 *
 * Effective task definitions: each task keeps what was written (`spec`)
 * and, after ax_dagset_validate(), the effective definition (`eff`):
 * built-in defaults < DAG `defaults` < the task template < the task.
 * `params` and `env` merge key by key in the same order.
 *
 * Content hash: SHA-256 (hex) of the canonical JSON form, i.e.
 * ax_dag_to_json() dumped with sorted keys and no whitespace. The JSON
 * holds effective tasks, so a change to a template a DAG uses also gives
 * the DAG a new version, while comments, key order and YAML formatting do
 * not. Positions and file names are not part of it.
 */
#ifndef AX_DAG_H
#define AX_DAG_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ax_err.h"
#include "deadline.h"
#include "sha256.h"

/* Position of a YAML node: 1-based line and column, like compilers. */
typedef struct ax_pos {
	const char *file; /* path as given by the caller */
	uint32_t    line; /* 0: unknown */
	uint32_t    col;  /* of the first character of the value */
	uint32_t indent;  /* block scalars (| or >): content column, else 0 */
} ax_pos;

/*
 * Position of byte off inside the scalar value whose first character is
 * at p (quotes already skipped). Lines and indentation of block scalars
 * are followed; escapes in double-quoted scalars are not.
 */
ax_pos ax_pos_at(ax_pos p, const char *value, size_t off);

typedef enum ax_impact {
	AX_IMPACT_P0 = 0, /* business-critical link */
	AX_IMPACT_P1,
	AX_IMPACT_P2, /* default */
	AX_IMPACT_P3,
} ax_impact;

typedef enum ax_channel {
	AX_CHANNEL_PX = 0, /* default: shared P1..P3 capacity */
	AX_CHANNEL_P0,
	AX_CHANNEL_K8S,
	AX_CHANNEL_BIZ,
} ax_channel;

typedef enum ax_overlap {
	AX_OVERLAP_SERIAL = 0, /* default: queue runs, one after another */
	AX_OVERLAP_PARALLEL,
	AX_OVERLAP_DISCARD, /* drop the new run while one is active */
	AX_OVERLAP_REPLACE, /* cancel the active run, start the new one */
} ax_overlap;

typedef enum ax_dep_mode {
	AX_DEP_SAME_PERIOD = 0, /* default: the upstream run of my period */
	AX_DEP_LATEST_SUCCESS,  /* the upstream's latest success, any period */
} ax_dep_mode;

typedef enum ax_backoff {
	AX_BACKOFF_FIXED = 0,
	AX_BACKOFF_EXPONENTIAL,
} ax_backoff;

typedef enum ax_routing_kind {
	AX_ROUTE_ROUND_ROBIN = 0,
	AX_ROUTE_RANDOM,
	AX_ROUTE_LEAST_LOAD,
	AX_ROUTE_CONSISTENT_HASH, /* sticky by key */
	AX_ROUTE_PINNED,          /* one node */
} ax_routing_kind;

/* Also declared, identically, by schedule.h: whichever comes first wins,
 * so a module may include both. */
#ifndef AX_SCHED_KIND_DEFINED
#define AX_SCHED_KIND_DEFINED
typedef enum ax_sched_kind {
	AX_SCHED_NONE = 0, /* API / manual triggers only */
	AX_SCHED_CRON,
	AX_SCHED_EVERY, /* fixed rate anchored at start */
	AX_SCHED_AT,    /* one instant */
} ax_sched_kind;
#endif

/* Enum <-> YAML spelling ("P0", "px", "serial", ...). */
const char *ax_impact_name(ax_impact v);
const char *ax_channel_name(ax_channel v);
const char *ax_overlap_name(ax_overlap v);
const char *ax_dep_mode_name(ax_dep_mode v);
const char *ax_backoff_name(ax_backoff v);
const char *ax_routing_name(ax_routing_kind v);
const char *ax_sched_kind_name(ax_sched_kind v);

/* Where an env value comes from (params are always AX_KV_VALUE). */
typedef enum ax_kv_source {
	AX_KV_VALUE = 0, /* value is the text (may hold {{ }} templates) */
	AX_KV_FROM_FILE, /* value is a file the worker reads at start */
	AX_KV_FROM_ENV,  /* value names a variable of the worker's env */
} ax_kv_source;

/* One key: value entry of params or env, in document order. */
typedef struct ax_kv {
	const char  *key;
	const char  *value;
	ax_pos       key_pos;
	ax_pos       pos;    /* of the value */
	ax_kv_source source; /* env {from_file: ...} / {from_env: ...} */
} ax_kv;

typedef struct ax_kvs {
	ax_kv *v;
	size_t n;
} ax_kvs;

/* Declared type of a DAG param (`params: {n: {type: integer}}`). */
typedef enum ax_param_type {
	AX_PT_TEXT = 0, /* a plain `name: default`: any string, number or
	                   boolean */
	AX_PT_STRING,
	AX_PT_INTEGER,
	AX_PT_NUMBER,
	AX_PT_BOOLEAN,
} ax_param_type;

/* What a DAG declares about one of its params, beyond the default. */
typedef struct ax_param_decl {
	ax_param_type type;
	const char   *pattern; /* POSIX ERE the whole value matches, or NULL */
	ax_pos        pos;     /* of the declaration's mapping */
	ax_pos        pattern_pos;
} ax_param_decl;

typedef struct ax_retry {
	int        count;        /* extra attempts after the first */
	ax_backoff backoff;      /* delay growth between attempts */
	int64_t    delay_us;     /* first delay */
	int64_t    max_delay_us; /* cap for exponential backoff */
} ax_retry;

typedef struct ax_routing {
	ax_routing_kind kind;
	const char     *key;  /* consistent_hash: template text */
	const char     *node; /* pinned: worker node name */
} ax_routing;

/* Bits of ax_task_spec.set: which fields were written. */
enum {
	AX_TF_TYPE          = 1u << 0,
	AX_TF_COMMAND       = 1u << 1,
	AX_TF_PRIORITY      = 1u << 2,
	AX_TF_CHANNEL       = 1u << 3,
	AX_TF_GROUP         = 1u << 4,
	AX_TF_POOL          = 1u << 5,
	AX_TF_RETRY_COUNT   = 1u << 6, /* retries merge field by field */
	AX_TF_TIMEOUT       = 1u << 7,
	AX_TF_CPU           = 1u << 8,
	AX_TF_MEMORY        = 1u << 9,
	AX_TF_SHARDS        = 1u << 10,
	AX_TF_ROUTING       = 1u << 11, /* strategy, key, node as a whole */
	AX_TF_RETRY_BACKOFF = 1u << 12,
	AX_TF_RETRY_DELAY   = 1u << 13,
	AX_TF_RETRY_MAX     = 1u << 14,
	AX_TF_RUN_AS        = 1u << 15,
	AX_TF_PREEMPTIBLE   = 1u << 16,
	AX_TF_COUNT_        = 17, /* number of bits */
};

/*
 * What a task runs and how: shared by tasks, templates and DAG defaults.
 * Fields not in `set` hold the built-in defaults.
 */
typedef struct ax_task_spec {
	uint32_t    set;          /* AX_TF_* */
	const char *type;         /* "bash" (default) */
	const char *command;      /* may hold {{ }} templates */
	ax_pos      command_pos;  /* where command was written */
	int         priority;     /* 0..100, higher first; default 50 */
	ax_channel  channel;      /* default px */
	const char *worker_group; /* default "default" */
	const char *pool;         /* NULL: none */
	ax_retry    retries;      /* default 0, fixed, 1m, max 1h */
	int64_t     timeout_us;   /* 0: none */
	int         cpu_milli;    /* 0: unspecified; 1000 = one core */
	int64_t     memory_bytes; /* 0: unspecified */
	ax_kvs      res;     /* named resources (resources: {gpu: 1}): name ->
	                        whole amount 1..AX_RES_AMOUNT_MAX, at most
	                        AX_RES_MAX; merged name by name like env */
	int         shards;  /* default 1 */
	ax_routing  routing; /* default round_robin */
	ax_kvs      params;
	ax_kvs      env;
	const char *run_as; /* user to run as; NULL: the worker's default */
	ax_pos      run_as_pos;
	/* 1: the queue may stop a running attempt for a waiting instance of
	 * a higher tier (preemption); default 0 */
	int preemptible;
} ax_task_spec;

/*
 * A `deadline:` as written (dag_yaml.c) and, once validated
 * (dag_validate.c) or read back from JSON, as the spec deadline.h
 * computes with. Zeroed: none declared.
 */
typedef struct ax_deadline_decl {
	int              set; /* the key was written */
	ax_pos           pos; /* of the mapping */
	const char      *at;  /* "HH:MM" as written, or NULL */
	ax_pos           at_pos;
	int              has_after;
	int64_t          after_us;
	ax_pos           after_pos;
	int              has_day;
	int              day;
	ax_pos           day_pos;
	ax_deadline_spec spec; /* kind NONE until validated */
} ax_deadline_decl;

typedef struct ax_task_template ax_task_template;

typedef struct ax_task {
	const char  *name;
	ax_pos       pos; /* of the task's mapping */
	ax_pos       name_pos;
	const char  *template_name; /* NULL: inline type */
	ax_pos       template_pos;
	const char **depends_on; /* task names as written */
	ax_pos      *depends_pos;
	size_t       n_depends;
	size_t      *deps;          /* indices into dag->tasks (validated) */
	ax_task_spec spec;          /* as written */
	ax_task_spec eff;           /* effective (after validate) */
	ax_task_template *template; /* resolved template or NULL */
	ax_deadline_decl deadline;  /* of this task alone (not inherited) */
} ax_task;

struct ax_task_template {
	const char  *name;
	ax_pos       pos; /* of the document */
	ax_pos       name_pos;
	const char  *description;
	ax_task_spec spec;
	const char  *yaml;  /* source text of this document */
	int          valid; /* no error was reported for this template */
	char hash[AX_SHA256_HEX_LEN]; /* canonical JSON hash (validated) */
};

typedef struct ax_dag_dep {
	const char *dag;
	ax_dep_mode mode;
	ax_pos      pos;
} ax_dag_dep;

typedef struct ax_schedule_spec {
	ax_sched_kind kind;
	const char   *cron; /* AX_SCHED_CRON */
	ax_pos        cron_pos;
	const char   *timezone; /* IANA name; default "UTC" */
	ax_pos        tz_pos;
	int64_t       every_us; /* AX_SCHED_EVERY */
	ax_pos        every_pos;
	const char   *at; /* AX_SCHED_AT: ISO 8601 text */
	ax_pos        at_pos;
} ax_schedule_spec;

typedef struct ax_dag {
	const char      *name; /* hierarchical: ods.orders.daily */
	ax_pos           pos;  /* of the document */
	ax_pos           name_pos;
	const char      *owner;
	ax_impact        impact;
	const char      *description;
	const char     **tags;
	size_t           n_tags;
	ax_schedule_spec schedule;
	/* start/end: ISO 8601 date or date-time; without an offset it is
	 * wall time in schedule.timezone. NULL: unbounded. */
	const char      *start;
	ax_pos           start_pos;
	const char      *end;
	ax_pos           end_pos;
	int              catchup;         /* default 0 */
	int              max_active_runs; /* default 1 */
	ax_overlap       policy;          /* default serial */
	ax_task_spec     defaults;
	ax_deadline_decl deadline; /* of the whole run */
	ax_kvs           params;
	/* parallel to params.v; NULL when no param has a type or pattern */
	ax_param_decl *param_decls;
	ax_dag_dep    *deps; /* depends_on_dags */
	size_t         n_deps;
	ax_task       *tasks;
	size_t         n_tasks;
	size_t        *topo; /* task indices, upstream first (validated, or
	                        NULL when there is a cycle) */
	const char *yaml;    /* source text of this document */
	int         valid;   /* no error was reported for this DAG */
	char hash[AX_SHA256_HEX_LEN]; /* canonical JSON hash (validated) */
} ax_dag;

/* One error, printed as FILE:LINE:COL: error: MSG. */
typedef struct ax_diag {
	ax_pos      pos;
	const char *msg;
} ax_diag;

typedef struct ax_arena ax_arena;

/* Limits on hostile input; ax_dag_limits_default() gives the defaults. */
typedef struct ax_dag_limits {
	size_t max_file_bytes;  /* default 1 MiB */
	size_t max_tasks;       /* per DAG, default 5000 */
	size_t max_depth;       /* YAML nesting, default 32 */
	size_t max_alias_nodes; /* nodes added by aliases, default 10000 */
	size_t max_documents;   /* per file, default 1000 */
	size_t max_diags;       /* errors kept per set, default 1000 */
} ax_dag_limits;

ax_dag_limits ax_dag_limits_default(void);

typedef struct ax_dagset {
	ax_arena          *arena;
	ax_dag_limits      limits;
	ax_dag           **dags;
	size_t             n_dags;
	ax_task_template **templates;
	size_t             n_templates;
	ax_diag           *diags;
	size_t             n_diags;
	size_t             cap_diags;
	size_t             n_dropped; /* diagnostics over max_diags */
	size_t             cap_dags, cap_templates;
} ax_dagset;

/* Creates an empty set (limits NULL: defaults). AX_ENOMEM on failure. */
ax_err ax_dagset_new(const ax_dag_limits *limits, ax_dagset **out);

/* Frees the set and everything in it; NULL is fine. */
void ax_dagset_free(ax_dagset *set);

/* Arena allocation tied to the set (zeroed; NULL on out of memory). */
void *ax_dagset_alloc(ax_dagset *set, size_t size);
char *ax_dagset_strndup(ax_dagset *set, const char *s, size_t n);
char *ax_dagset_strdup(ax_dagset *set, const char *s);

/* Appends an empty DAG / template to the set (NULL: out of memory). */
ax_dag           *ax_dagset_add_dag(ax_dagset *set);
ax_task_template *ax_dagset_add_template(ax_dagset *set);

/* Records an error at pos (copied). Thread: the set's owner. */
void ax_dagset_error(ax_dagset *set, ax_pos pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Sorts the diagnostics by file, line, column and drops exact duplicates
 * (a DAG default reported once per task, for example).
 */
void ax_dagset_sort_diags(ax_dagset *set);

/* Number of errors whose position is in file (NULL: all). */
size_t ax_dagset_error_count(const ax_dagset *set, const char *file);

/* Writes every diagnostic, `FILE:LINE:COL: error: MSG`, one per line. */
void ax_dagset_print_diags(const ax_dagset *set, FILE *f);

/* Looks a DAG / template up by name (NULL: none). */
ax_dag           *ax_dagset_find_dag(const ax_dagset *set, const char *name);
ax_task_template *ax_dagset_find_template(const ax_dagset *set,
                                          const char      *name);

/* Index of the task named name in dag, or -1. */
long ax_dag_task_index(const ax_dag *dag, const char *name);

/* Built-in defaults of a task spec (nothing set). */
void ax_task_spec_defaults(ax_task_spec *spec);

/*
 * Computes a topological order of dag's tasks (upstream first, ties in
 * document order) into dag->topo, from the resolved task->deps. Returns
 * AX_EINVAL when there is a cycle (dag->topo stays NULL).
 */
ax_err ax_dag_toposort(ax_dagset *set, ax_dag *dag);

/*
 * JSON form of a validated DAG / template (new reference; NULL on out of
 * memory). Canonical: no positions, effective tasks, durations in
 * microseconds and as text.
 */
json_t *ax_dag_to_json(const ax_dag *dag);
json_t *ax_template_to_json(const ax_task_template *tpl);

/*
 * The inverse of ax_dag_to_json: rebuilds a DAG from its stored definition
 * (dag_versions.definition) into set. The result has effective tasks
 * (spec == eff), resolved deps, topo, valid = 1 and the content hash of
 * its canonical JSON, which equals the hash of the DAG that was stored.
 * Positions are unknown (0). A task's template is a stand-in carrying
 * only the name and hash the JSON records. Errors: AX_EPARSE naming the
 * JSON pointer of the first bad member ("DAG definition /tasks/2/shards:
 * expected an integer"), AX_EINVAL for a dependency cycle, AX_ENOMEM.
 * *out (owned by set) is NULL on failure.
 */
ax_err ax_dag_from_json(ax_dagset *set, const json_t *j, ax_dag **out);

/* SHA-256 hex of the canonical dump of j (sorted keys, compact). */
ax_err ax_json_hash(const json_t *j, char hex[AX_SHA256_HEX_LEN]);

#endif /* AX_DAG_H */
