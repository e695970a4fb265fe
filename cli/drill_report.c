/*
 * drill_report.c - marks, tally and report of `axctl drill` (see
 * drill_report.h).
 */
#include "drill_report.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

int
ax_drill_mark_parse(const char *line, ax_drill_mark *m)
{
	char    kind[8], key[AX_DRILL_KEY_MAX], rid[48], tail;
	int     attempt;
	int64_t us;

	memset(m, 0, sizeof(*m));
	/* %199s / %47s: the buffers above; tail catches trailing junk */
	if (sscanf(line, "%7s %199s %47s %d %" SCNd64 " %c", kind, key, rid,
	           &attempt, &us, &tail) != 5)
		return -1;
	if (strcmp(kind, "start") != 0 && strcmp(kind, "end") != 0)
		return -1;
	if (attempt < 1 || us <= 0 || strchr(key, '/') == NULL)
		return -1;
	m->end     = kind[0] == 'e';
	m->attempt = attempt;
	m->utc_us  = us;
	snprintf(m->key, sizeof(m->key), "%s", key);
	snprintf(m->run_id, sizeof(m->run_id), "%s", rid);
	return 0;
}

int
ax_drill_terminal(const char *state)
{
	static const char *const terminal[] = { "SUCCESS", "FAILED", "TIMEOUT",
		                                "CANCELED", "SKIPPED" };
	for (size_t i = 0; i < sizeof(terminal) / sizeof(terminal[0]); i++)
		if (strcmp(state, terminal[i]) == 0)
			return 1;
	return 0;
}

static void
flag(ax_drill_tally *t, int kind, const char *key)
{
	if (t->bad[kind] < AX_DRILL_SAMPLES)
		snprintf(t->sample[kind][t->bad[kind]], AX_DRILL_KEY_MAX, "%s",
		         key);
	t->bad[kind]++;
}

static int
is_expected(char *const *expected, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(expected[i], key) == 0)
			return 1;
	return 0;
}

/* The end mark of run_id, or NULL when that execution never ended. */
static const ax_drill_mark *
end_of(const ax_drill_mark *marks, size_t n, const char *run_id)
{
	for (size_t i = 0; i < n; i++)
		if (marks[i].end && strcmp(marks[i].run_id, run_id) == 0)
			return &marks[i];
	return NULL;
}

/*
 * 1 when key ran twice: some run_id of key has two start marks (AX started
 * one attempt twice), or an execution of key started while another one,
 * started before it, had not ended yet and did end later (the original
 * and its retry side by side: the first was not gone before the retry).
 */
static int
ran_twice(const ax_drill_mark *marks, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++) {
		const ax_drill_mark *a = &marks[i], *ae;
		if (a->end || strcmp(a->key, key) != 0)
			continue;
		ae = end_of(marks, n, a->run_id);
		for (size_t j = 0; j < n; j++) {
			const ax_drill_mark *b = &marks[j];
			if (j == i || b->end || strcmp(b->key, key) != 0)
				continue;
			if (strcmp(b->run_id, a->run_id) == 0)
				return 1;
			if (ae != NULL && a->utc_us <= b->utc_us &&
			    ae->utc_us > b->utc_us)
				return 1;
		}
	}
	return 0;
}

static void
count_key(ax_drill_tally *t, const char *key, const ax_drill_mark *marks,
          size_t n_marks, const ax_drill_row *rows, size_t n_rows)
{
	long                ends = 0;
	const ax_drill_row *row  = NULL;

	for (size_t i = 0; i < n_marks; i++)
		if (marks[i].end && strcmp(marks[i].key, key) == 0)
			ends++;
	for (size_t i = 0; i < n_rows && row == NULL; i++)
		if (strcmp(rows[i].key, key) == 0)
			row = &rows[i];
	if (ends == 0)
		flag(t, AX_DRILL_LOST, key);
	else if (ran_twice(marks, n_marks, key))
		flag(t, AX_DRILL_TWICE, key);
	else if (ends > 1)
		t->redone++;
	else
		t->once++;
	if (row == NULL)
		return;
	if (!ax_drill_terminal(row->state))
		flag(t, AX_DRILL_STUCK, key);
	else if ((strcmp(row->state, "SUCCESS") == 0) != (ends > 0))
		flag(t, AX_DRILL_DISAGREE, key);
}

void
ax_drill_tally_count(ax_drill_tally *t, char *const *expected,
                     size_t n_expected, const ax_drill_mark *marks,
                     size_t n_marks, const ax_drill_row *rows, size_t n_rows,
                     long stuck_runs)
{
	memset(t, 0, sizeof(*t));
	t->recovery_s = -1;
	t->expected   = (long) n_expected;
	t->stuck_runs = stuck_runs;
	for (size_t i = 0; i < n_expected; i++)
		count_key(t, expected[i], marks, n_marks, rows, n_rows);
	for (size_t i = 0; i < n_marks; i++) {
		if (!marks[i].end)
			t->starts++;
		if (!marks[i].end &&
		    !is_expected(expected, n_expected, marks[i].key))
			t->unexpected++;
	}
	for (size_t i = 0; i < n_rows; i++) {
		if (is_expected(expected, n_expected, rows[i].key))
			continue;
		/* a stored instance nobody asked for still must not hang */
		if (!ax_drill_terminal(rows[i].state))
			flag(t, AX_DRILL_STUCK, rows[i].key);
		t->unexpected++;
	}
	t->bad[AX_DRILL_STUCK] += stuck_runs;
}

double
ax_drill_recovery(const ax_drill_mark *marks, size_t n_marks, int64_t fault_us,
                  char *const *after_ids, size_t n_ids)
{
	int64_t first = -1;

	for (size_t i = 0; i < n_marks; i++) {
		const ax_drill_mark *m = &marks[i];
		if (m->end || m->utc_us < fault_us ||
		    (first >= 0 && m->utc_us >= first))
			continue;
		for (size_t j = 0; j < n_ids; j++)
			if (strcmp(after_ids[j], m->run_id) == 0) {
				first = m->utc_us;
				break;
			}
	}
	return first < 0 ? -1 : (double) (first - fault_us) / 1e6;
}

int
ax_drill_ok(const ax_drill_tally *t)
{
	for (int k = 0; k < AX_DRILL_KINDS; k++)
		if (t->bad[k] != 0)
			return 0;
	return 1;
}

void
ax_drill_tally_add(ax_drill_tally *a, const ax_drill_tally *b)
{
	a->expected += b->expected;
	a->once += b->once;
	a->redone += b->redone;
	for (int k = 0; k < AX_DRILL_KINDS; k++) {
		for (long i = 0; i < b->bad[k] && i < AX_DRILL_SAMPLES; i++)
			if (a->bad[k] + i < AX_DRILL_SAMPLES)
				memcpy(a->sample[k][a->bad[k] + i],
				       b->sample[k][i], AX_DRILL_KEY_MAX);
		a->bad[k] += b->bad[k];
	}
	a->stuck_runs += b->stuck_runs;
	a->unexpected += b->unexpected;
	a->refused += b->refused;
	a->starts += b->starts;
	a->restarts += b->restarts;
	if (b->recovery_s > a->recovery_s)
		a->recovery_s = b->recovery_s;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *) a, y = *(const double *) b;
	return x < y ? -1 : x > y;
}

double
ax_drill_percentile(double *v, size_t n, double p)
{
	size_t rank;

	if (n == 0)
		return -1;
	qsort(v, n, sizeof(*v), cmp_double);
	rank = (size_t) ((p / 100.0) * (double) n + 0.999999);
	if (rank < 1)
		rank = 1;
	return v[(rank > n ? n : rank) - 1];
}

static const char *const kind_name[AX_DRILL_KINDS] = { "lost", "twice",
	                                               "stuck", "disagree" };

/* The recoveries that were measured (>= 0) first; returns their count. */
static size_t
measured(double *rec, size_t n)
{
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		if (rec[i] >= 0) {
			double x = rec[m];
			rec[m++] = rec[i];
			rec[i]   = x;
		}
	return m;
}

void
ax_drill_print(FILE *f, const char *drill, const ax_drill_tally *t,
               double *rec, size_t n_rec)
{
	fprintf(f,
	        "drill %s: %s\n"
	        "  instance keys expected: %ld\n"
	        "  executed once:          %ld\n"
	        "  lost:                   %ld\n"
	        "  completed again later:  %ld\n"
	        "  executed twice:         %ld\n"
	        "  stuck (not terminal):   %ld (%ld runs)\n"
	        "  database disagrees:     %ld\n"
	        "  unexpected keys:        %ld\n"
	        "  triggers refused:       %ld\n"
	        "  daemons restarted:      %ld\n",
	        drill, ax_drill_ok(t) ? "ok" : "FAILED", t->expected, t->once,
	        t->bad[AX_DRILL_LOST], t->redone, t->bad[AX_DRILL_TWICE],
	        t->bad[AX_DRILL_STUCK], t->stuck_runs,
	        t->bad[AX_DRILL_DISAGREE], t->unexpected, t->refused,
	        t->restarts);
	if (n_rec == 0 && t->recovery_s >= 0)
		fprintf(f, "  recovery:               %.3f s\n",
		        t->recovery_s);
	else if (n_rec == 0)
		fprintf(f,
		        "  recovery:               none (no task started "
		        "after the fault)\n");
	else {
		size_t m   = measured(rec, n_rec);
		double med = ax_drill_percentile(rec, m, 50); /* sorts */
		fprintf(f,
		        "  repetitions:            %zu\n"
		        "  recovery median:        %.3f s\n"
		        "  recovery max:           %.3f s (%zu of %zu "
		        "measured)\n",
		        n_rec, med, m > 0 ? rec[m - 1] : -1.0, m, n_rec);
	}
	for (int k = 0; k < AX_DRILL_KINDS; k++)
		for (long i = 0; i < t->bad[k] && i < AX_DRILL_SAMPLES; i++)
			fprintf(f, "  %s: %s\n", kind_name[k],
			        t->sample[k][i]);
}

static json_t *
num_or_null(double v)
{
	return v >= 0 ? json_real(v) : json_null();
}

void
ax_drill_json(FILE *f, const char *drill, const ax_drill_tally *t, double *rec,
              size_t n_rec)
{
	json_t *o = json_pack(
	    "{s:s,s:b,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:o}",
	    "drill", drill, "ok", ax_drill_ok(t), "expected",
	    (json_int_t) t->expected, "once", (json_int_t) t->once, "redone",
	    (json_int_t) t->redone, "lost", (json_int_t) t->bad[AX_DRILL_LOST],
	    "twice", (json_int_t) t->bad[AX_DRILL_TWICE], "stuck",
	    (json_int_t) t->bad[AX_DRILL_STUCK], "stuck_runs",
	    (json_int_t) t->stuck_runs, "disagree",
	    (json_int_t) t->bad[AX_DRILL_DISAGREE], "unexpected",
	    (json_int_t) t->unexpected, "refused", (json_int_t) t->refused,
	    "starts", (json_int_t) t->starts, "restarts",
	    (json_int_t) t->restarts, "recovery_s",
	    num_or_null(t->recovery_s));
	char *s;

	if (o == NULL)
		return;
	for (int k = 0; k < AX_DRILL_KINDS; k++) {
		char    name[32];
		json_t *a = json_array();
		for (long i = 0; i < t->bad[k] && i < AX_DRILL_SAMPLES; i++)
			json_array_append_new(a, json_string(t->sample[k][i]));
		snprintf(name, sizeof(name), "%s_keys", kind_name[k]);
		json_object_set_new(o, name, a);
	}
	if (n_rec > 0) {
		size_t m = measured(rec, n_rec);
		json_object_set_new(o, "repetitions",
		                    json_integer((json_int_t) n_rec));
		json_object_set_new(
		    o, "recovery_median_s",
		    num_or_null(ax_drill_percentile(rec, m, 50)));
		json_object_set_new(o, "recovery_max_s",
		                    num_or_null(m > 0 ? rec[m - 1] : -1));
	}
	if ((s = json_dumps(o, JSON_COMPACT)) != NULL) {
		fprintf(f, "%s\n", s);
		free(s);
	}
	json_decref(o);
}
