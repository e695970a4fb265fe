/*
 * heap.h - indexed binary min-heap of intrusive nodes: every element
 * knows its position, so removing or re-keying any element is O(log n).
 *
 * Role: the queue service's attempt heaps (per channel and worker group,
 * per worker) and the resource detector's lanes. The caller embeds an
 * ax_heap_node in its object and gives the heap an order: before(a, b)
 * is 1 when a must come out before b (a strict weak order; ties leave
 * the order unspecified, so break them, e.g. by arrival sequence, when
 * FIFO among equals matters).
 *
 * Invariants: for every i > 0, !before(v[i], v[(i - 1) / 2]); and
 * v[i]->idx == i for every element. An element is in at most one heap
 * through one node; while it is in, only the heap writes its idx.
 *
 * Cost: push, pop, remove, update O(log n); top O(1). The array doubles
 * (8 bytes an element); nothing is allocated per element. Threads: no
 * locking; one owner.
 */
#ifndef AX_HEAP_H
#define AX_HEAP_H

#include <stddef.h>

#include "ax_err.h"

typedef struct ax_heap_node {
	size_t idx; /* position in the heap's array while in it */
} ax_heap_node;

typedef int (*ax_heap_before_fn)(const ax_heap_node *a, const ax_heap_node *b);

/* Embedded by its owner; initialise with ax_heap_init. */
typedef struct ax_heap {
	ax_heap_node    **v;
	size_t            n, cap;
	ax_heap_before_fn before;
} ax_heap;

/* The object of type embedding node as member; NULL for a NULL node.
 * node is evaluated once (AX_HEAP_ENTRY(ax_heap_pop(l), ...) is fine). */
#define AX_HEAP_ENTRY(node, type, member)                                     \
	((type *) ax_heap_entry_((node), offsetof(type, member)))

static inline void *
ax_heap_entry_(const void *node, size_t off)
{
	return node != NULL ? (void *) ((char *) node - off) : NULL;
}

/* An empty heap ordered by before. Allocates nothing. */
void ax_heap_init(ax_heap *h, ax_heap_before_fn before);

/* Frees the array (not the elements); h is empty afterwards. Safe on
 * zeroed memory. */
void ax_heap_fini(ax_heap *h);

/* Adds x (in no heap). AX_ENOMEM (h unchanged). */
ax_err ax_heap_push(ax_heap *h, ax_heap_node *x);

/* The first element, or NULL when empty. */
static inline ax_heap_node *
ax_heap_top(const ax_heap *h)
{
	return h->n > 0 ? h->v[0] : NULL;
}

/* Removes and returns the first element (NULL when empty). */
ax_heap_node *ax_heap_pop(ax_heap *h);

/* Removes x, which must be in h (see ax_heap_contains). */
void ax_heap_remove(ax_heap *h, ax_heap_node *x);

/* Restores the order after x's key changed (x in h), either way. */
void ax_heap_update(ax_heap *h, ax_heap_node *x);

/* 1 when x is in h. */
static inline int
ax_heap_contains(const ax_heap *h, const ax_heap_node *x)
{
	return x->idx < h->n && h->v[x->idx] == x;
}

static inline size_t
ax_heap_count(const ax_heap *h)
{
	return h->n;
}

/* The element at array position i < count (heap order, not sorted):
 * for visiting every element. */
static inline ax_heap_node *
ax_heap_at(const ax_heap *h, size_t i)
{
	return h->v[i];
}

#endif /* AX_HEAP_H */
