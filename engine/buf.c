/*
 * buf.c - growable buffer with a sticky error, and ax_grow (see buf.h).
 */
#include "buf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_MIN 64

void
ax_buf_init(ax_buf *b, size_t max)
{
	memset(b, 0, sizeof(*b));
	b->max = max;
}

void
ax_buf_fini(ax_buf *b)
{
	size_t max = b->max;

	free(b->p);
	ax_buf_init(b, max);
}

void
ax_buf_reset(ax_buf *b)
{
	b->len = 0;
	b->err = AX_OK;
	if (b->p != NULL)
		b->p[0] = '\0';
}

/* Room for n more bytes and the NUL; 0, or -1 with b->err set. */
static int
ensure(ax_buf *b, size_t n)
{
	size_t need, cap;
	char  *p;

	if (b->err != AX_OK)
		return -1;
	if (n > SIZE_MAX - b->len - 1) {
		b->err = AX_ENOMEM;
		return -1;
	}
	if (b->max > 0 && b->len + n > b->max) {
		b->err = AX_ELIMIT;
		return -1;
	}
	need = b->len + n + 1;
	if (need <= b->cap)
		return 0;
	cap = b->cap ? b->cap : BUF_MIN;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	if ((p = realloc(b->p, cap)) == NULL) {
		b->err = AX_ENOMEM;
		return -1;
	}
	b->p   = p;
	b->cap = cap;
	return 0;
}

char *
ax_buf_reserve(ax_buf *b, size_t n)
{
	if (ensure(b, n) != 0)
		return NULL;
	return b->p + b->len;
}

void
ax_buf_commit(ax_buf *b, size_t n)
{
	if (b->err != AX_OK || b->p == NULL)
		return;
	b->len += n;
	b->p[b->len] = '\0';
}

void
ax_buf_append(ax_buf *b, const void *p, size_t n)
{
	char *w = ax_buf_reserve(b, n);

	if (w == NULL)
		return;
	if (n > 0)
		memcpy(w, p, n);
	ax_buf_commit(b, n);
}

void
ax_buf_puts(ax_buf *b, const char *s)
{
	ax_buf_append(b, s, strlen(s));
}

void
ax_buf_putc(ax_buf *b, char c)
{
	ax_buf_append(b, &c, 1);
}

void
ax_buf_vprintf(ax_buf *b, const char *fmt, va_list ap)
{
	size_t  room = b->cap > b->len ? b->cap - b->len : 0;
	va_list ap2;
	int     n;

	if (b->err != AX_OK)
		return;
	/* one pass when it fits in the room left, else measure and redo */
	va_copy(ap2, ap);
	n = vsnprintf(b->p != NULL ? b->p + b->len : NULL, room, fmt, ap2);
	va_end(ap2);
	if (n < 0) {
		b->err = AX_EINVAL; /* a bad format or wide character */
		if (b->p != NULL)
			b->p[b->len] = '\0';
		return;
	}
	if ((size_t) n < room) {
		if (b->max > 0 && b->len + (size_t) n > b->max) {
			b->err       = AX_ELIMIT;
			b->p[b->len] = '\0';
			return;
		}
		b->len += (size_t) n;
		return;
	}
	if (b->p != NULL)
		b->p[b->len] = '\0'; /* the cut attempt must not show */
	if (ax_buf_reserve(b, (size_t) n) == NULL)
		return;
	vsnprintf(b->p + b->len, (size_t) n + 1, fmt, ap);
	b->len += (size_t) n;
}

void
ax_buf_printf(ax_buf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ax_buf_vprintf(b, fmt, ap);
	va_end(ap);
}

void
ax_buf_set_err(ax_buf *b, ax_err err)
{
	if (b->err == AX_OK && err != AX_OK)
		b->err = err;
}

ax_err
ax_buf_take(ax_buf *b, char **out, size_t *len)
{
	ax_err err = b->err;

	*out = NULL;
	if (len != NULL)
		*len = 0;
	if (err != AX_OK) {
		size_t had = b->len;
		ax_buf_fini(b);
		if (err == AX_ELIMIT)
			return ax_err_set(err,
			                  "text longer than its limit of %zu "
			                  "bytes (cut after %zu)",
			                  b->max, had);
		if (err == AX_EINVAL)
			return ax_err_set(err,
			                  "text not formatted (bad "
			                  "format or character)");
		return ax_err_set(err,
		                  "out of memory building a text "
		                  "(%zu bytes so far)",
		                  had);
	}
	if (b->p == NULL && ensure(b, 0) != 0) {
		ax_buf_fini(b);
		return ax_err_set(AX_ENOMEM, "out of memory building a text");
	}
	b->p[b->len] = '\0';
	*out         = b->p;
	if (len != NULL)
		*len = b->len;
	b->p   = NULL;
	b->len = b->cap = 0;
	return AX_OK;
}

ax_err
ax_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	size_t ncap;
	void  *n;

	if (need <= *cap)
		return AX_OK;
	ncap = *cap ? *cap : 16;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return ax_err_set(AX_ENOMEM, "array of %zu elements",
			                  need);
		ncap *= 2;
	}
	if (elem != 0 && ncap > SIZE_MAX / elem)
		return ax_err_set(AX_ENOMEM, "array of %zu elements", need);
	if ((n = realloc(*arr, ncap * elem)) == NULL)
		return ax_err_set(AX_ENOMEM,
		                  "out of memory growing an array to %zu "
		                  "elements",
		                  ncap);
	*arr = n;
	*cap = ncap;
	return AX_OK;
}
