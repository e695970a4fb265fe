/*
 * drill_report.h - the pure parts of `axctl drill`: the marks the drill's
 * tasks write, the tally of instance keys (expected, once, lost, twice,
 * stuck, disagreeing with the database), the recovery time, and the
 * report as text or JSON. Kept apart from cmd_drill.c so they are tested
 * without processes or a database (tests/unit/test_drill_report.c).
 *
 * Marks: every drill task appends two lines to the drill's marks file,
 * each one write(2) on an O_APPEND descriptor, so lines of concurrent
 * tasks never interleave:
 *     start KEY RUN_ID ATTEMPT UTC_US
 *     end KEY RUN_ID ATTEMPT UTC_US
 * KEY is the instance key DAG/TASK/LOGICAL_DATE_EPOCH_S/SHARD. A start
 * without an end is an execution that was killed (or is still running).
 *
 * Invariants: no I/O except into the caller's FILE; nothing global.
 * Workload: hundreds of keys and marks per drill: linear scans.
 */
#ifndef AX_DRILL_REPORT_H
#define AX_DRILL_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define AX_DRILL_KEY_MAX 200
#define AX_DRILL_SAMPLES 5 /* keys shown per kind of failure */

typedef struct ax_drill_mark {
	int     end;                   /* 0: start line, 1: end line */
	char    key[AX_DRILL_KEY_MAX]; /* DAG/TASK/EPOCH_S/SHARD */
	char    run_id[48];            /* AX_RUN_ID */
	int     attempt;               /* AX_ATTEMPT */
	int64_t utc_us;                /* when the line was written */
} ax_drill_mark;

/* One task instance as the database has it. */
typedef struct ax_drill_row {
	char key[AX_DRILL_KEY_MAX];
	char state[16]; /* task_instances.state */
} ax_drill_row;

/* Kinds of failure, each with a count and sample keys. */
enum {
	AX_DRILL_LOST = 0, /* expected, never completed */
	AX_DRILL_TWICE,    /* one run_id started twice, or two executions
	                      side by side */
	AX_DRILL_STUCK,    /* not terminal in the database after settling */
	AX_DRILL_DISAGREE, /* marks and database disagree on completion */
	AX_DRILL_KINDS,
};

typedef struct ax_drill_tally {
	long expected; /* instance keys the workload should produce */
	long once;     /* expected keys completed exactly once */
	long redone;   /* completed, then run again by a later attempt
	                  after the first had ended (its report was lost
	                  with its worker): once per attempt, not a
	                  failure */
	long   bad[AX_DRILL_KINDS];
	char   sample[AX_DRILL_KINDS][AX_DRILL_SAMPLES][AX_DRILL_KEY_MAX];
	long   stuck_runs; /* dag_runs not terminal (also in bad[STUCK]) */
	long   unexpected; /* keys marked or stored that were not expected */
	long   refused;    /* triggers the API never accepted (not expected) */
	long   starts;     /* start marks */
	long   restarts;   /* daemons the supervisor started again */
	double recovery_s; /* fault to first task started again; < 0: none */
} ax_drill_tally;

/*
 * Parses one marks line (without or with its newline) into m. Returns 0,
 * or -1 for a line that is not a mark (a torn or foreign line).
 */
int ax_drill_mark_parse(const char *line, ax_drill_mark *m);

/* 1 when a task_instances state is terminal (SUCCESS, FAILED, TIMEOUT,
 * CANCELED, SKIPPED). */
int ax_drill_terminal(const char *state);

/*
 * Fills t (zeroed first, recovery_s set to -1) from the expected keys, the
 * marks and the database rows of the drill's DAGs. stuck_runs is the
 * number of drill runs not terminal. A key counts once in each kind:
 * lost (no end mark), twice (a run_id with two or more start marks, or an
 * execution that started before another one and ended after that one
 * started: the original and its retry side by side), stuck (its row is
 * not terminal), disagree (its row is terminal and says SUCCESS while no
 * end mark exists, or has an end mark and says otherwise). A key with
 * two or more end marks one after the other is redone, not twice: AX
 * runs a task once per instance key and attempt, and an attempt whose
 * result died with its worker is run again by the next attempt.
 */
void ax_drill_tally_count(ax_drill_tally *t, char *const *expected,
                          size_t n_expected, const ax_drill_mark *marks,
                          size_t n_marks, const ax_drill_row *rows,
                          size_t n_rows, long stuck_runs);

/*
 * The recovery time in seconds: from fault_us to the first start mark at
 * or after it whose run_id is one of after_ids (the attempts dispatched
 * after the fault); -1 when there is none.
 */
double ax_drill_recovery(const ax_drill_mark *marks, size_t n_marks,
                         int64_t fault_us, char *const *after_ids,
                         size_t n_ids);

/* 1 when t shows nothing lost, twice, stuck or disagreeing. */
int ax_drill_ok(const ax_drill_tally *t);

/* Adds the counts of b into a (recovery_s: the larger; samples kept
 * from a while it has room). */
void ax_drill_tally_add(ax_drill_tally *a, const ax_drill_tally *b);

/* The p-th percentile (nearest rank) of v[0..n) (sorted in place);
 * -1 when n is 0. */
double ax_drill_percentile(double *v, size_t n, double p);

/*
 * The report: human-readable lines, or one JSON object with the keys
 * drill, ok, expected, once, redone, lost, twice, stuck, stuck_runs,
 * disagree,
 * unexpected, refused, starts, restarts, recovery_s (null when none) and
 * lost_keys, twice_keys, stuck_keys, disagree_keys (samples). With
 * n_rec > 0 (a --repeat summary) also repetitions, recovery_median_s and
 * recovery_max_s over rec[0..n_rec) (sorted in place).
 */
void ax_drill_print(FILE *f, const char *drill, const ax_drill_tally *t,
                    double *rec, size_t n_rec);
void ax_drill_json(FILE *f, const char *drill, const ax_drill_tally *t,
                   double *rec, size_t n_rec);

#endif /* AX_DRILL_REPORT_H */
