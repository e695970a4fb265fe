/*
 * group_spec.h - where a task may run: its `worker_group` as text, one of
 *
 *   "etl"                 that worker group;
 *   "gpu-a,gpu-b"         any of these groups (up to AX_GSPEC_MAX);
 *   "gpu=a100,zone=east"  any group whose workers all carry these labels
 *                         (a label selector; every term key=value).
 *
 * The DAG format writes the second as a YAML list and the third as
 * {labels: {gpu: a100, zone: east}}; the loader turns both into this text,
 * which is what the stored DAG, the messages and the PENDING rows carry. Where
 * more than one group may take the task, the resource detector picks one at
 * admission (by water level and the configured cost weight,
 * resources.group_cost) and from then on the instance names that group.
 *
 * Labels are what a worker declares (worker.labels, e.g. {gpu: a100});
 * a group carries a label when every live worker of it does, so any
 * worker the queue hands the attempt to satisfies the selector.
 *
 * Names: a group name is letters, digits, '_', '.', '-', ':' (up to
 * AX_GROUP_NAME_MAX); a label key the same (plus '/'), a label value
 * letters, digits, '_', '.', '-' (up to AX_LABEL_MAX). Pure: no I/O.
 */
#ifndef AX_GROUP_SPEC_H
#define AX_GROUP_SPEC_H

#include <stddef.h>

#include "ax_err.h"

#define AX_GSPEC_MAX      16
#define AX_GROUP_NAME_MAX 63
#define AX_LABEL_MAX      63
#define AX_LABELS_MAX     32

typedef enum {
	AX_GSPEC_NAME = 0, /* one group */
	AX_GSPEC_ANY,      /* any of names[0..n) */
	AX_GSPEC_LABELS,   /* any group carrying labels[0..n) */
} ax_gspec_kind;

typedef struct ax_label {
	char key[AX_LABEL_MAX + 1];
	char value[AX_LABEL_MAX + 1];
} ax_label;

typedef struct ax_group_spec {
	ax_gspec_kind kind;
	size_t        n;
	char          names[AX_GSPEC_MAX][AX_GROUP_NAME_MAX + 1];
	ax_label      labels[AX_GSPEC_MAX];
} ax_group_spec;

/*
 * Parses spec text (NULL or "": the group "default") into *out.
 * AX_EINVAL with a detail naming the bad term and the fix.
 */
ax_err ax_group_spec_parse(const char *text, ax_group_spec *out);

/* 1 when text names more than one possible group (a list or a label
 * selector), without parsing it: a ',' or '=' in it. */
int ax_group_spec_multi(const char *text);

/* 1 when name is a valid group name (see above). */
int ax_group_name_ok(const char *name);

/*
 * Parses labels text "k=v, k2=v2" (the form worker.labels takes; spaces
 * around terms ignored) into out[0..max), setting *n. what names the
 * source in the detail (e.g. "worker.labels"). A repeated key is an
 * error. AX_EINVAL with a detail on a bad term.
 */
ax_err ax_labels_parse(const char *text, const char *what, ax_label *out,
                       size_t max, size_t *n);

/* 1 when every label of sel[0..nsel) is in have[0..nhave) with the same
 * value (nsel = 0: always). */
int ax_labels_match(const ax_label *sel, size_t nsel, const ax_label *have,
                    size_t nhave);

/*
 * Writes the canonical text of labels[0..n) into buf ("k=v,k2=v2",
 * sorted by key, so equal sets give equal text); returns buf ("" when
 * it does not fit).
 */
char *ax_labels_text(ax_label *labels, size_t n, char *buf, size_t len);

#endif /* AX_GROUP_SPEC_H */
