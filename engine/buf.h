/*
 * buf.h - growable byte buffer and string builder with a sticky error,
 * and the one array-grow helper.
 *
 * Role: text built piece by piece (the Prometheus exposition of ax-api,
 * SQL array literals, rendered commands) and arrays that grow by
 * appending (the actors' per-tick batches).
 *
 * Sticky error: the first failure (out of memory, or the text passing the
 * buffer's max) is recorded and every later append is a no-op, so a
 * builder appends without checking each call and asks once at the end
 * (ax_buf_err, ax_buf_take) whether the text is whole. After an error the
 * content is the text up to the failed call, never a torn piece of it.
 *
 * Invariants: p is NULL or holds len bytes followed by a NUL, inside cap;
 * len <= max when max > 0; err, once set, stays until ax_buf_reset or
 * ax_buf_take. Zeroed memory is an empty buffer without a limit.
 *
 * Cost: appends are amortised O(bytes) (capacity doubles). Threads: no
 * locking; one owner.
 */
#ifndef AX_BUF_H
#define AX_BUF_H

#include <stdarg.h>
#include <stddef.h>

#include "ax_err.h"

typedef struct ax_buf {
	char  *p;   /* NULL until the first byte */
	size_t len; /* bytes of text (the NUL not counted) */
	size_t cap; /* bytes allocated at p */
	size_t max; /* 0: no limit; else len never passes it (AX_ELIMIT) */
	ax_err err; /* first failure; AX_OK while whole */
} ax_buf;

/* An empty buffer whose text may hold at most max bytes (0: no limit). */
void ax_buf_init(ax_buf *b, size_t max);

/* Frees the text; b is an empty buffer (same max) afterwards. Safe on
 * zeroed memory. */
void ax_buf_fini(ax_buf *b);

/* Empties the text (keeps the memory) and clears the error. */
void ax_buf_reset(ax_buf *b);

/* Appends n bytes (which may contain NULs). */
void ax_buf_append(ax_buf *b, const void *p, size_t n);

/* Appends the NUL-terminated s. */
void ax_buf_puts(ax_buf *b, const char *s);

void ax_buf_putc(ax_buf *b, char c);

/* Appends printf-formatted text. */
void ax_buf_printf(ax_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void ax_buf_vprintf(ax_buf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/*
 * Makes room for n more bytes plus the NUL and returns where they go
 * (the caller writes there, then calls ax_buf_commit with what it
 * wrote), or NULL when the buffer has (or now gets) an error.
 */
char *ax_buf_reserve(ax_buf *b, size_t n);

/* Counts n bytes written at ax_buf_reserve's pointer (n <= reserved). */
void ax_buf_commit(ax_buf *b, size_t n);

/* The text so far ("" when empty; valid until the next change). */
static inline const char *
ax_buf_str(const ax_buf *b)
{
	return b->p != NULL ? b->p : "";
}

static inline size_t
ax_buf_len(const ax_buf *b)
{
	return b->len;
}

/* AX_OK while every append went in; else the first error. The detail
 * was set when it happened: reading it later needs ax_buf_take. */
static inline ax_err
ax_buf_err(const ax_buf *b)
{
	return b->err;
}

/* Marks the text incomplete for a failure outside the buffer (memory a
 * builder needed for its own work): err (not AX_OK) becomes the sticky
 * error unless one is set already. */
void ax_buf_set_err(ax_buf *b, ax_err err);

/*
 * Hands the text to the caller: *out (free() it; never NULL on success,
 * "" for an empty text) and *len (may be NULL). On an earlier error the
 * text is freed instead and that error is returned with a detail saying
 * what failed (the one report of the failure). b is empty and without
 * an error afterwards, either way.
 */
ax_err ax_buf_take(ax_buf *b, char **out, size_t *len);

/*
 * Makes room for need elements of elem bytes in *arr (capacity *cap in
 * elements, doubled as needed, at least 16). AX_OK, or AX_ENOMEM (detail
 * set) with *arr and *cap unchanged. The array-grow helper of AX; use
 * AX_GROW for typed arrays.
 */
ax_err ax_grow(void **arr, size_t *cap, size_t need, size_t elem);

#define AX_GROW(arr, cap, need)                                               \
	ax_grow((void **) &(arr), &(cap), (need), sizeof(*(arr)))

#endif /* AX_BUF_H */
