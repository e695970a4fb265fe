/*
 * list.h - intrusive doubly-linked list: the object embeds an
 * ax_list_node per list it can be on, the list is a head and a tail.
 *
 * Role: FIFOs and ordered lists of the actors (every list of the queue
 * service: attempts in flight, unacked, held, retired, in doubt; the
 * lease FIFO and the park and doubt deadline lists; the DAG registry's
 * CLOCK list, the time detector's LRU of compiled schedules). No
 * allocation ever; every operation is O(1) except ax_list_insert_sorted,
 * which walks back from the tail (items that arrive almost in key order
 * cost a step or two).
 *
 * Zeroed memory is an empty list and an unlinked node, so objects from
 * calloc need no init. The ends are NULL-terminated (not circular): a
 * node alone on a list looks like an unlinked one, so an owner that must
 * know whether a node is linked keeps a flag (or the list it is on).
 *
 * Invariants: head == NULL iff tail == NULL; head->prev and tail->next
 * are NULL; a node is on at most one list through one ax_list_node.
 * Removing a node that is not on the list given is undefined: the owner
 * knows which list holds it. Threads: no locking.
 *
 * Iteration may remove the current node if the next one is read first:
 *     for (ax_list_node *n = l.head, *nx; n != NULL; n = nx) {
 *             nx = n->next;
 *             ... ax_list_remove(&l, n) ...
 *     }
 */
#ifndef AX_LIST_H
#define AX_LIST_H

#include <stddef.h>

typedef struct ax_list_node {
	struct ax_list_node *next, *prev;
} ax_list_node;

typedef struct ax_list {
	ax_list_node *head, *tail;
} ax_list;

/* The object of type embedding node as member; NULL for a NULL node.
 * node is evaluated once (AX_LIST_ENTRY(ax_list_pop(l), ...) is fine). */
#define AX_LIST_ENTRY(node, type, member)                                     \
	((type *) ax_list_entry_((node), offsetof(type, member)))

static inline void *
ax_list_entry_(const void *node, size_t off)
{
	return node != NULL ? (void *) ((char *) node - off) : NULL;
}

static inline int
ax_list_empty(const ax_list *l)
{
	return l->head == NULL;
}

/* n (unlinked) goes after pos (pos on l; NULL: at the head). */
static inline void
ax_list_insert_after(ax_list *l, ax_list_node *pos, ax_list_node *n)
{
	n->prev = pos;
	n->next = pos != NULL ? pos->next : l->head;
	if (n->next != NULL)
		n->next->prev = n;
	else
		l->tail = n;
	if (pos != NULL)
		pos->next = n;
	else
		l->head = n;
}

static inline void
ax_list_append(ax_list *l, ax_list_node *n)
{
	ax_list_insert_after(l, l->tail, n);
}

static inline void
ax_list_prepend(ax_list *l, ax_list_node *n)
{
	ax_list_insert_after(l, NULL, n);
}

/* n (on l) leaves l and is unlinked afterwards. */
static inline void
ax_list_remove(ax_list *l, ax_list_node *n)
{
	if (n->prev != NULL)
		n->prev->next = n->next;
	else
		l->head = n->next;
	if (n->next != NULL)
		n->next->prev = n->prev;
	else
		l->tail = n->prev;
	n->next = n->prev = NULL;
}

/* Removes and returns the head (NULL when empty). */
static inline ax_list_node *
ax_list_pop(ax_list *l)
{
	ax_list_node *n = l->head;
	if (n != NULL)
		ax_list_remove(l, n);
	return n;
}

/*
 * Inserts n into l kept in ascending order of before(): n goes after
 * every node b with !before(n, b), i.e. after the nodes with an equal
 * key. The walk starts at the tail.
 */
static inline void
ax_list_insert_sorted(ax_list *l, ax_list_node *n,
                      int (*before)(const ax_list_node *a,
                                    const ax_list_node *b))
{
	ax_list_node *p = l->tail;
	while (p != NULL && before(n, p))
		p = p->prev;
	ax_list_insert_after(l, p, n);
}

#endif /* AX_LIST_H */
