/*
 * store_sqlarr.c - the batch limit of the store modules and the
 * PostgreSQL array literals their batched statements take as parameters
 * (see store_internal.h): one literal per column, one element per row,
 * so a batch costs one round trip per statement whatever its size.
 * Every row's ids and texts pass through here: no printf, and runs of
 * text without a character to escape are copied whole.
 */
#include "store_internal.h"

#include <stdint.h>
#include <string.h>

#include "buf.h"

/* ---------------------------------------------------------------------- */
/* batch limit and array parameters of the batched statements */

ax_err
ax_store_batch_check(size_t n, const char *what)
{
	if (n <= AX_STORE_BATCH_MAX)
		return AX_OK;
	return ax_err_set(AX_EINVAL,
	                  "store: %s: %zu rows, at most %d per call", what, n,
	                  AX_STORE_BATCH_MAX);
}

static void
sqlarr_put(ax_sqlarr *a, const char *s, size_t n)
{
	ax_buf_append(&a->b, s, n);
}

static void
sqlarr_sep(ax_sqlarr *a)
{
	sqlarr_put(a, a->n++ == 0 ? "{" : ",", 1);
}

void
ax_sqlarr_int(ax_sqlarr *a, int64_t v)
{
	/* digits from the end; no printf (a hot path: ids of every row) */
	char     b[24];
	size_t   i = sizeof(b);
	uint64_t u = v < 0 ? 0 - (uint64_t) v : (uint64_t) v;
	do {
		b[--i] = (char) ('0' + u % 10);
		u /= 10;
	} while (u != 0);
	if (v < 0)
		b[--i] = '-';
	sqlarr_sep(a);
	sqlarr_put(a, b + i, sizeof(b) - i);
}

void
ax_sqlarr_int0(ax_sqlarr *a, int64_t v)
{
	if (v == 0) {
		sqlarr_sep(a);
		sqlarr_put(a, "NULL", 4);
		return;
	}
	ax_sqlarr_int(a, v);
}

/* Text element: always quoted, " and \ escaped; NULL is SQL NULL. */
void
ax_sqlarr_text(ax_sqlarr *a, const char *s)
{
	sqlarr_sep(a);
	if (s == NULL) {
		sqlarr_put(a, "NULL", 4);
		return;
	}
	sqlarr_put(a, "\"", 1);
	/* runs without a character to escape are copied whole: payloads of
	 * a few hundred bytes went through here one byte per call */
	for (const char *p = s; *p != '\0';) {
		size_t run = strcspn(p, "\"\\");
		sqlarr_put(a, p, run);
		p += run;
		if (*p != '\0') {
			char esc[2] = { '\\', *p++ };
			sqlarr_put(a, esc, 2);
		}
	}
	sqlarr_put(a, "\"", 1);
}

void
ax_sqlarr_bool(ax_sqlarr *a, int v)
{
	sqlarr_sep(a);
	sqlarr_put(a, v ? "t" : "f", 1);
}

const char *
ax_sqlarr_end(ax_sqlarr *a)
{
	sqlarr_put(a, a->n == 0 ? "{}" : "}", a->n == 0 ? 2 : 1);
	return ax_buf_err(&a->b) != AX_OK ? NULL : ax_buf_str(&a->b);
}

void
ax_sqlarr_fini(ax_sqlarr *a)
{
	ax_buf_fini(&a->b);
	a->n = 0;
}

ax_err
ax_sqlarr_end_all(ax_sqlarr *a, const char **p, size_t n)
{
	ax_err rv = AX_OK;
	for (size_t i = 0; i < n; i++)
		if ((p[i] = ax_sqlarr_end(&a[i])) == NULL)
			rv = ax_err_set(AX_ENOMEM,
			                "store: out of memory for an array "
			                "parameter");
	return rv;
}

void
ax_sqlarr_fini_all(ax_sqlarr *a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ax_sqlarr_fini(&a[i]);
}
