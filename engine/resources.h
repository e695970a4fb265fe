/*
 * resources.h - named resources (gpu, licenses, ssd, ...): what a task
 * declares (`resources: {gpu: 1}`), what a worker offers
 * (`worker.resources: {gpu: 2}`) and the fit of one against the other.
 *
 * A named resource is a name (letters, digits, '_', '.', '-', not "cpu"
 * or "memory", which are their own fields) and a whole amount of 1 up to
 * AX_RES_AMOUNT_MAX. A set holds at most AX_RES_MAX of them: a task or a
 * worker that names more is refused with an error saying so. Everything
 * here is pure (no I/O, no allocation) and may be called from any thread.
 */
#ifndef AX_RESOURCES_H
#define AX_RESOURCES_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"

#define AX_RES_MAX        16         /* named resources per set */
#define AX_RES_NAME_MAX   64         /* bytes of a name */
#define AX_RES_AMOUNT_MAX 1000000000 /* largest amount */

typedef struct ax_res {
	char    name[AX_RES_NAME_MAX + 1];
	int64_t amount;
} ax_res;

/* A small set of named resources (by value; zeroed memory is empty). */
typedef struct ax_res_set {
	ax_res v[AX_RES_MAX];
	int    n;
} ax_res_set;

/* Whether s is a valid resource name (not cpu or memory). */
int ax_res_name_ok(const char *s);

/* The amount of name in set, 0 when absent. */
int64_t ax_res_get(const ax_res_set *set, const char *name);

/*
 * Adds delta to name's amount in set (a missing name starts at 0; a
 * result of 0 or less removes it). AX_ELIMIT when set is full.
 */
ax_err ax_res_add(ax_res_set *set, const char *name, int64_t delta);

/*
 * Parses "gpu=1, ssd=2" (the form configuration keys of named resources
 * are stored in; blanks and commas separate pairs) into out. what names
 * the place for the error (e.g. "worker.resources"): AX_ECONFIG with a
 * detail naming the bad pair and the fix.
 */
ax_err ax_res_parse(const char *s, const char *what, ax_res_set *out);

/*
 * The first of the n resources need[] that does not fit, or NULL when all
 * fit: need[i] fits when offer holds that resource and used (what
 * admitted work already takes of it) plus the need stays within the
 * offer, or nothing of it is used (a task needing more than the whole
 * offer still runs alone, never stuck forever). A resource the offer
 * does not hold at all never fits: no worker has it.
 */
const char *ax_res_short(const ax_res *need, size_t n, const ax_res_set *offer,
                         const ax_res_set *used);

#endif /* AX_RESOURCES_H */
