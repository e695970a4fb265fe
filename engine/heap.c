/*
 * heap.c - indexed binary heap (see heap.h).
 */
#include "heap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void
ax_heap_init(ax_heap *h, ax_heap_before_fn before)
{
	memset(h, 0, sizeof(*h));
	h->before = before;
}

void
ax_heap_fini(ax_heap *h)
{
	free(h->v);
	h->v = NULL;
	h->n = h->cap = 0;
}

static void
place(ax_heap *h, size_t i, ax_heap_node *x)
{
	h->v[i] = x;
	x->idx  = i;
}

/* x belongs at i or above: moves the parents it beats down. */
static void
sift_up(ax_heap *h, size_t i, ax_heap_node *x)
{
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!h->before(x, h->v[p]))
			break;
		place(h, i, h->v[p]);
		i = p;
	}
	place(h, i, x);
}

/* x belongs at i or below: moves the children that beat it up. */
static void
sift_down(ax_heap *h, size_t i, ax_heap_node *x)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = l;
		if (l >= h->n)
			break;
		if (r < h->n && h->before(h->v[r], h->v[l]))
			m = r;
		if (!h->before(h->v[m], x))
			break;
		place(h, i, h->v[m]);
		i = m;
	}
	place(h, i, x);
}

ax_err
ax_heap_push(ax_heap *h, ax_heap_node *x)
{
	if (h->n == h->cap) {
		size_t         cap = h->cap ? h->cap * 2 : 16;
		ax_heap_node **v;
		if (cap > SIZE_MAX / sizeof(*v) ||
		    (v = realloc(h->v, cap * sizeof(*v))) == NULL)
			return ax_err_set(AX_ENOMEM,
			                  "heap: out of memory growing to %zu",
			                  cap);
		h->v   = v;
		h->cap = cap;
	}
	sift_up(h, h->n++, x);
	return AX_OK;
}

/* Fills the hole at i with the last element. */
static void
fill(ax_heap *h, size_t i)
{
	ax_heap_node *last = h->v[--h->n];

	if (i == h->n)
		return;
	if (i > 0 && h->before(last, h->v[(i - 1) / 2]))
		sift_up(h, i, last);
	else
		sift_down(h, i, last);
}

ax_heap_node *
ax_heap_pop(ax_heap *h)
{
	ax_heap_node *top = ax_heap_top(h);

	if (top != NULL)
		fill(h, 0);
	return top;
}

void
ax_heap_remove(ax_heap *h, ax_heap_node *x)
{
	fill(h, x->idx);
}

void
ax_heap_update(ax_heap *h, ax_heap_node *x)
{
	size_t i = x->idx;

	if (i > 0 && h->before(x, h->v[(i - 1) / 2]))
		sift_up(h, i, x);
	else
		sift_down(h, i, x);
}
