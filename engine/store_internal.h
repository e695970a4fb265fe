/*
 * store_internal.h - what the store's table modules (store_*.c) share
 * and callers of the store do not use: the array literals their batched
 * statements take as parameters. Include it from store_*.c only (and
 * from the unit test of the literals).
 *
 * Invariants: a literal is built by one thread; zeroed memory is an
 * empty array; an allocation failure is sticky (ax_buf) and reported
 * once, by ax_sqlarr_end / ax_sqlarr_end_all.
 */
#ifndef AX_STORE_INTERNAL_H
#define AX_STORE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "buf.h"
#include "store.h"

/*
 * AX_OK when a batch of n rows fits in one call (n <= AX_STORE_BATCH_MAX),
 * else AX_EINVAL whose detail names the call (what), n and the limit.
 */
ax_err ax_store_batch_check(size_t n, const char *what);

/*
 * PostgreSQL array literals, the parameters of the batched statements
 * (unnest($1::bigint[], ...)): one literal per column, one element per
 * row, whatever the batch size.
 */

/* A growing array literal "{...}"; zeroed memory is an empty array. */
typedef struct ax_sqlarr {
	ax_buf b; /* the text; its sticky error (out of memory) makes
	             ax_sqlarr_end return NULL */
	size_t n; /* elements so far */
} ax_sqlarr;

void ax_sqlarr_int(ax_sqlarr *a, int64_t v);
/* Appends NULL when v == 0 (for columns where 0 means NULL). */
void ax_sqlarr_int0(ax_sqlarr *a, int64_t v);
/* Appends s quoted and escaped; NULL appends SQL NULL. */
void ax_sqlarr_text(ax_sqlarr *a, const char *s);
void ax_sqlarr_bool(ax_sqlarr *a, int v);
/* Closes the literal and returns it (valid until fini); NULL on OOM. */
const char *ax_sqlarr_end(ax_sqlarr *a);
void        ax_sqlarr_fini(ax_sqlarr *a);

/* Closes the n literals of a into p[i] (the parameters of one batched
 * statement); AX_ENOMEM when one of them is unusable. */
ax_err ax_sqlarr_end_all(ax_sqlarr *a, const char **p, size_t n);
/* Frees the n literals of a. */
void ax_sqlarr_fini_all(ax_sqlarr *a, size_t n);

#endif /* AX_STORE_INTERNAL_H */
