/*
 * test_heap.c - the indexed heap: random pushes, pops, removals of any
 * element and key updates either way, checked after every step against a
 * sorted reference; ties; positions; and an element moved between heaps.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "heap.h"

typedef struct el {
	int          key;
	int          seq; /* tie-break: FIFO among equal keys */
	int          in;  /* reference: in the heap */
	ax_heap_node hn;
} el;

static int
el_before(const ax_heap_node *a, const ax_heap_node *b)
{
	const el *x = AX_HEAP_ENTRY(a, el, hn), *y = AX_HEAP_ENTRY(b, el, hn);
	if (x->key != y->key)
		return x->key < y->key;
	return x->seq < y->seq;
}

static int
cmp_el(const void *a, const void *b)
{
	const el *x = *(el *const *) a, *y = *(el *const *) b;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The heap property, every position, and the top against the reference
 * minimum of the elements marked in. */
static void
verify(const ax_heap *h, el *v, int n)
{
	el    *best = NULL;
	size_t in   = 0;

	for (size_t i = 0; i < ax_heap_count(h); i++) {
		ax_heap_node *x = ax_heap_at(h, i);
		cr_assert_eq(x->idx, i);
		if (i > 0)
			cr_assert(!el_before(x, ax_heap_at(h, (i - 1) / 2)),
			          "heap order broken at %zu", i);
	}
	for (int i = 0; i < n; i++) {
		cr_assert_eq(ax_heap_contains(h, &v[i].hn), v[i].in, "el %d",
		             i);
		if (!v[i].in)
			continue;
		in++;
		if (best == NULL || el_before(&v[i].hn, &best->hn))
			best = &v[i];
	}
	cr_assert_eq(ax_heap_count(h), in);
	cr_assert_eq(AX_HEAP_ENTRY(ax_heap_top(h), el, hn), best);
}

Test(heap, random_operations_against_sorted_reference)
{
	enum { N = 3000 };
	static el v[N];
	ax_heap   h;
	int       seq = 0;

	srand(4242);
	ax_heap_init(&h, el_before);
	for (int step = 0; step < 60000; step++) {
		int i = rand() % N, op = rand() % 5;
		el *e = &v[i];
		if (!e->in && op < 2) {
			e->key = rand() % 500; /* many ties */
			e->seq = seq++;
			cr_assert_eq(ax_heap_push(&h, &e->hn), AX_OK);
			e->in = 1;
		} else if (e->in && op == 2) {
			ax_heap_remove(&h, &e->hn);
			e->in = 0;
		} else if (e->in && op == 3) {
			e->key += rand() % 2 ? 137 : -137; /* either way */
			ax_heap_update(&h, &e->hn);
		} else if (op == 4 && ax_heap_count(&h) > 0) {
			el *t = AX_HEAP_ENTRY(ax_heap_pop(&h), el, hn);
			cr_assert(t->in);
			t->in = 0;
			for (int j = 0; j < N; j++)
				if (v[j].in)
					cr_assert(!el_before(&v[j].hn, &t->hn),
					          "popped %d before %d",
					          t->key, v[j].key);
		}
		if (step % 97 == 0)
			verify(&h, v, N);
	}
	verify(&h, v, N);
	/* draining gives the sorted reference */
	el    *ref[N], *e;
	size_t n = 0;
	for (int i = 0; i < N; i++)
		if (v[i].in)
			ref[n++] = &v[i];
	qsort(ref, n, sizeof(ref[0]), cmp_el);
	for (size_t i = 0; i < n; i++) {
		e = AX_HEAP_ENTRY(ax_heap_pop(&h), el, hn);
		cr_assert_eq(e, ref[i], "pop %zu: key %d seq %d, want %d/%d",
		             i, e->key, e->seq, ref[i]->key, ref[i]->seq);
		e->in = 0;
	}
	cr_assert_null(ax_heap_pop(&h));
	cr_assert_null(ax_heap_top(&h));
	ax_heap_fini(&h);
}

Test(heap, fifo_among_equal_keys)
{
	el      v[100];
	ax_heap h;

	ax_heap_init(&h, el_before);
	for (int i = 0; i < 100; i++) {
		v[i] = (el) { .key = i % 3, .seq = i };
		cr_assert_eq(ax_heap_push(&h, &v[i].hn), AX_OK);
	}
	for (int k = 0; k < 3; k++)
		for (int i = k; i < 100; i += 3)
			cr_assert_eq(ax_heap_pop(&h), &v[i].hn);
	ax_heap_fini(&h);
}

Test(heap, move_between_heaps_and_remove_last)
{
	el      a = { .key = 1 }, b = { .key = 2 }, c = { .key = 3 };
	ax_heap h1, h2;

	ax_heap_init(&h1, el_before);
	ax_heap_init(&h2, el_before);
	cr_assert_eq(ax_heap_push(&h1, &a.hn), AX_OK);
	cr_assert_eq(ax_heap_push(&h1, &b.hn), AX_OK);
	cr_assert_eq(ax_heap_push(&h1, &c.hn), AX_OK);
	ax_heap_remove(&h1, &c.hn); /* the last position */
	cr_assert(!ax_heap_contains(&h1, &c.hn));
	ax_heap_remove(&h1, &a.hn); /* the top */
	cr_assert_eq(ax_heap_top(&h1), &b.hn);
	cr_assert_eq(ax_heap_push(&h2, &a.hn), AX_OK);
	cr_assert(ax_heap_contains(&h2, &a.hn));
	cr_assert(!ax_heap_contains(&h1, &a.hn));
	ax_heap_remove(&h1, &b.hn);
	cr_assert_eq(ax_heap_count(&h1), 0);
	cr_assert_null(ax_heap_pop(&h1));
	ax_heap_fini(&h1);
	ax_heap_fini(&h2);
	ax_heap_fini(&h2); /* fini twice is fine */
}
