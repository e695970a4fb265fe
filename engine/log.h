/*
 * log.h - structured logging: one JSON object per line.
 *
 * Every line has "time" (UTC ISO 8601), "level", "component" and "msg";
 * "reason" (a stable reason code such as WAIT_DEPENDENCY) and the ids of
 * the objects involved (dag, run, instance, run_id, attempt) when known.
 * A line is written with one write(2), so lines from several threads or
 * processes sharing a file never interleave. The logger is configured once
 * by main() before threads start (ax_log_init) and is read-only after.
 */
#ifndef AX_LOG_H
#define AX_LOG_H

#include <stddef.h>
#include <stdint.h>

typedef enum ax_log_level {
	AX_LOG_DEBUG = 0,
	AX_LOG_INFO,
	AX_LOG_WARN,
	AX_LOG_ERROR,
	AX_LOG_OFF,
} ax_log_level;

/* Ids attached to a log line; zero / NULL members are omitted. */
typedef struct ax_log_ids {
	const char *dag;      /* DAG name */
	int64_t     run;      /* dag_run id */
	int64_t     instance; /* task_instance id */
	const char *run_id;   /* attempt run_id (uuid) */
	int32_t     attempt;  /* attempt number, 1-based */
} ax_log_ids;

/* Sets the minimum level and the output fd (default: INFO, stderr). */
void ax_log_init(ax_log_level min, int fd);

/* Parses "debug", "info", "warn", "error", "off"; -1 when unknown. */
int ax_log_level_parse(const char *s);

/* Whether a line at lvl would be written. */
int ax_log_enabled(ax_log_level lvl);

/*
 * Writes one line. component names the module or actor ("store",
 * "time_detector"); reason may be NULL; ids may be NULL.
 */
void ax_logf(ax_log_level lvl, const char *component, const char *reason,
             const ax_log_ids *ids, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define ax_log_debug(comp, ...)                                               \
	ax_logf(AX_LOG_DEBUG, comp, NULL, NULL, __VA_ARGS__)
#define ax_log_info(comp, ...)                                                \
	ax_logf(AX_LOG_INFO, comp, NULL, NULL, __VA_ARGS__)
#define ax_log_warn(comp, ...)                                                \
	ax_logf(AX_LOG_WARN, comp, NULL, NULL, __VA_ARGS__)
#define ax_log_error(comp, ...)                                               \
	ax_logf(AX_LOG_ERROR, comp, NULL, NULL, __VA_ARGS__)

/*
 * Appends s to buf as a JSON string body (without quotes), escaping
 * control characters, quotes and backslashes; invalid UTF-8 bytes become
 * U+FFFD. Returns the new length; never writes past cap-1 and keeps buf
 * NUL-terminated.
 */
size_t ax_json_escape(char *buf, size_t len, size_t cap, const char *s);

/*
 * 1 when s is exactly one JSON object (RFC 8259; surrounding white space
 * allowed) that PostgreSQL's jsonb also accepts: valid UTF-8, no \u0000,
 * no unpaired surrogate escape, numbers of at most 1000 digits before and
 * after the point with at most a 3-digit exponent, at most 64 levels
 * deep. Allocates nothing.
 */
int ax_json_object_valid(const char *s);

#endif /* AX_LOG_H */
