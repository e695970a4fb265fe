/*
 * deadline.h - when a data interval's run (or one task of it) must have
 * succeeded: the `deadline:` a DAG or task declares
 * (docs/dag-format.md#deadlines), turned into one UTC instant.
 *
 * Role: dag_yaml.c reads the declaration, dag_validate.c checks it into
 * an ax_deadline_spec, dag.c stores it in the DAG's JSON; the dependency
 * detector (actors/dependency/deadline.c) computes the instant of each
 * run it creates or rebuilds with ax_deadline_instant and arms a timer
 * for it; ax-api shows the same instant on the run. Everything here is
 * pure: no I/O, no clock; table-driven tests in tests/unit/test_deadline.c.
 *
 * Two forms:
 *   after: D        the interval's end + D (D a duration, 1m..31d)
 *   at: "HH:MM"     a wall-clock time in the DAG's time zone on the
 *   day: N          local date of the interval's start + N days
 *                   (N 0..366, default 1: "the next day" for a daily run)
 *
 * DST: a wall time that falls in a spring-forward gap is the first
 * instant after the gap, one that repeats in a fall-back is its first
 * occurrence: the rules cron follows for jobs at a fixed time (cron.h).
 *
 * Threads: any; the functions share nothing.
 */
#ifndef AX_DEADLINE_H
#define AX_DEADLINE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "tz.h"

typedef enum ax_deadline_kind {
	AX_DEADLINE_NONE = 0, /* no deadline declared */
	AX_DEADLINE_AFTER,    /* a duration after the interval's end */
	AX_DEADLINE_AT,       /* a wall-clock time, N days after the start */
} ax_deadline_kind;

typedef struct ax_deadline_spec {
	ax_deadline_kind kind;
	int64_t          after_us; /* AFTER: > 0 */
	int32_t          at_sec;   /* AT: seconds after local midnight */
	int32_t          day;      /* AT: days after the start's local date */
} ax_deadline_spec;

#define AX_DEADLINE_DAY_MAX   366
#define AX_DEADLINE_AFTER_MIN (60LL * 1000000)         /* 1m */
#define AX_DEADLINE_AFTER_MAX (31LL * 86400 * 1000000) /* 31d */
#define AX_DEADLINE_TEXT_LEN  96

/*
 * Parses the `at` text "HH:MM" or "HH:MM:SS" (24-hour, two digits each)
 * into seconds after midnight. AX_EPARSE with a detail saying what is
 * wrong and how to write it otherwise.
 */
ax_err ax_deadline_parse_at(const char *text, int32_t *out_sec);

/*
 * The deadline instant (UTC us) of the data interval [start_us, end_us)
 * under spec, in zone tz (NULL: UTC). AX_EINVAL when spec declares no
 * deadline; AX_OK otherwise (every valid spec has an instant).
 */
ax_err ax_deadline_instant(const ax_deadline_spec *spec, int64_t start_us,
                           int64_t end_us, const ax_tz *tz, int64_t *out_us);

/*
 * The deadline as people write it, e.g. "08:00 day +1 Asia/Shanghai" or
 * "2h after the interval", into buf (AX_DEADLINE_TEXT_LEN bytes are
 * enough). tzname NULL means UTC. Returns buf.
 */
char *ax_deadline_text(const ax_deadline_spec *spec, const char *tzname,
                       char *buf, size_t len);

/*
 * The stored JSON form of spec (the `deadline` member of a DAG's or
 * task's definition, dag.c): {"after": "2h"} or {"at": "08:00",
 * "day": 1}. A new reference; NULL when spec declares none or out of
 * memory.
 */
json_t *ax_deadline_to_json(const ax_deadline_spec *spec);

/*
 * The inverse of ax_deadline_to_json into *out (j NULL or JSON null:
 * kind NONE). AX_EPARSE with a detail naming the bad member.
 */
ax_err ax_deadline_from_json(const json_t *j, ax_deadline_spec *out);

#endif /* AX_DEADLINE_H */
