/*
 * render.h - the template renderer for task commands, env and params.
 *
 * Role: the renderer actor calls ax_render() for each attempt; DAG
 * validation calls ax_render_check() so an unknown variable is an error at
 * submit time, never an empty string at run time.
 *
 * Syntax: text with `{{ EXPR }}` blocks. EXPR is a variable or a quoted
 * string literal ('...' or "..."), followed by zero or more filters
 * `| NAME` or `| NAME(ARG, ...)`; ARG is an integer or a quoted string.
 * `| raw` takes no argument and must come last.
 * `{{ '{{' }}` writes a literal "{{". Variables:
 *   ds                   logical date, YYYY-MM-DD           (date value)
 *   ds_nodash            logical date, YYYYMMDD             (date value)
 *   ts, logical_date     logical date, ISO 8601 + offset    (date value)
 *   data_interval_start  interval start, ISO 8601 + offset  (date value)
 *   data_interval_end    interval end, ISO 8601 + offset    (date value)
 *   run_id               the attempt's run id
 *   dag.name, task.name  names
 *   shard.index          0-based shard of this instance
 *   shard.total          number of shards (1 when not sharded)
 *   params.NAME          a declared parameter (DAG, template or task)
 * Filters on date values: add_days(N), add_hours(N), add_minutes(N)
 * (N may be negative; arithmetic on the fixed UTC offset of the context)
 * and format('STRFTIME') (e.g. format('%Y/%m/%d')), which turns the value
 * into text. Date values print in the DAG time zone, given by
 * utc_offset_s of the context (the caller converts with the tz module).
 *
 * Shell mode (ctx->shell, for the command of a bash task): every value
 * is written as data inside one shell word, quoted for its place in the
 * script (bare, "...", '...', heredoc, ...; see shell_quote.h), so no
 * value can change the command's structure; a value that cannot be placed
 * safely fails the render with the reason. `| raw` (last filter) writes
 * the value unquoted, and the template's own string literals ({{ '{{' }})
 * are script text. Params, env and routing keys render as plain text: no
 * shell reads them as syntax.
 *
 * Invariants: pure functions of (template, context); no global state,
 * thread-safe. Workload: a few short strings per attempt.
 */
#ifndef AX_RENDER_H
#define AX_RENDER_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"

#define AX_RENDER_MAX_OUT (1024 * 1024) /* bytes of rendered output */

typedef struct ax_render_param {
	const char *name;
	const char *value;
} ax_render_param;

/* Everything a template may refer to. Borrowed by ax_render(). */
typedef struct ax_render_ctx {
	int64_t                logical_date_us;   /* UTC microseconds */
	int64_t                interval_start_us; /* UTC microseconds */
	int64_t                interval_end_us;   /* UTC microseconds */
	int32_t                utc_offset_s;      /* DAG zone offset at ds */
	const char            *run_id;
	const char            *dag_name;
	const char            *task_name;
	int                    shard_index;
	int                    shard_total;
	const ax_render_param *params; /* already rendered values */
	size_t                 n_params;
	int                    shell; /* 1: tmpl is a bash script */
} ax_render_ctx;

/* Where and why a template is wrong. */
typedef struct ax_render_err {
	size_t offset;   /* byte offset in the template */
	char   msg[256]; /* e.g. "unknown template variable 'dss'; ..." */
} ax_render_err;

/*
 * Renders tmpl with ctx into *out (malloc'd, NUL-terminated, the caller
 * frees it). On an unknown variable, unknown filter, bad argument or
 * unterminated block returns AX_EPARSE, fills err (may be NULL) and sets
 * the ax_err detail "offset N: MSG"; *out is then NULL. Output longer than
 * AX_RENDER_MAX_OUT gives AX_ELIMIT.
 */
ax_err ax_render(const char *tmpl, const ax_render_ctx *ctx, char **out,
                 ax_render_err *err);

/* Called once per error found by ax_render_check(). */
typedef void (*ax_render_report_fn)(void *arg, size_t offset, const char *msg);

/*
 * Check mode for validation: variables are known, values are not. Every
 * error in tmpl is reported through report (may be NULL) in order of
 * offset; returns the number of errors (0: tmpl renders for every
 * context). params lists the parameter names in scope; with
 * any_param != 0 every params.NAME is accepted (a template checked before
 * the DAGs that use it declare their parameters).
 */
size_t ax_render_check(const char *tmpl, const char *const *params,
                       size_t n_params, int any_param,
                       ax_render_report_fn report, void *arg);

/*
 * Reports (offset, message) for each `| raw` filter in tmpl, in order, so
 * validation can warn about values written into a command unquoted.
 */
void ax_render_raw_uses(const char *tmpl, ax_render_report_fn report,
                        void *arg);

#endif /* AX_RENDER_H */
