/*
 * test_list.c - the intrusive list: append, prepend, insert, remove at
 * either end and in the middle, removal while iterating, an object on two
 * lists at once, sorted insertion with ties in arrival order, all checked
 * against a plain array model after every step.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "list.h"

typedef struct item {
	int          key, seq;
	ax_list_node a; /* on list A */
	ax_list_node b; /* on list B */
} item;

/* l holds exactly want[0..n) in order, walked both ways. */
static void
expect(const ax_list *l, item **want, size_t n)
{
	size_t        i = 0;
	ax_list_node *x;

	cr_assert_eq(l->head == NULL, l->tail == NULL);
	for (x = l->head; x != NULL; x = x->next, i++) {
		cr_assert_lt(i, n, "list longer than %zu", n);
		cr_assert_eq(AX_LIST_ENTRY(x, item, a), want[i], "at %zu", i);
		if (x->next == NULL)
			cr_assert_eq(l->tail, x);
	}
	cr_assert_eq(i, n);
	for (x = l->tail; x != NULL; x = x->prev)
		cr_assert_eq(AX_LIST_ENTRY(x, item, a), want[--i]);
	cr_assert_eq(ax_list_empty(l), n == 0);
}

Test(list, operations_against_model)
{
	item    it[200];
	item   *model[200];
	size_t  n = 0;
	ax_list l = { 0 };

	srand(7);
	for (int i = 0; i < 200; i++)
		it[i] = (item) { .key = i };
	for (int step = 0; step < 20000; step++) {
		int op = rand() % 4;
		if (n < 200 && op < 2) {
			/* an unlinked item: the first not in the model */
			item *x = NULL;
			for (int i = 0; i < 200 && x == NULL; i++) {
				int in = 0;
				for (size_t j = 0; j < n; j++)
					in |= model[j] == &it[i];
				if (!in)
					x = &it[i];
			}
			size_t pos = (size_t) rand() % (n + 1);
			ax_list_insert_after(
			    &l, pos == 0 ? NULL : &model[pos - 1]->a, &x->a);
			for (size_t j = n; j > pos; j--)
				model[j] = model[j - 1];
			model[pos] = x;
			n++;
		} else if (n > 0 && op == 2) {
			size_t pos = (size_t) rand() % n;
			ax_list_remove(&l, &model[pos]->a);
			cr_assert_null(model[pos]->a.next);
			cr_assert_null(model[pos]->a.prev);
			for (size_t j = pos; j + 1 < n; j++)
				model[j] = model[j + 1];
			n--;
		} else if (n > 0) {
			ax_list_node *h = ax_list_pop(&l);
			cr_assert_eq(AX_LIST_ENTRY(h, item, a), model[0]);
			for (size_t j = 0; j + 1 < n; j++)
				model[j] = model[j + 1];
			n--;
		}
		expect(&l, model, n);
	}
}

Test(list, append_prepend_pop)
{
	item    x[3] = { { .key = 0 }, { .key = 1 }, { .key = 2 } };
	ax_list l    = { 0 };

	cr_assert_null(ax_list_pop(&l));
	cr_assert_null(AX_LIST_ENTRY(l.head, item, a));
	ax_list_append(&l, &x[1].a);
	ax_list_prepend(&l, &x[0].a);
	ax_list_append(&l, &x[2].a);
	expect(&l, (item *[]) { &x[0], &x[1], &x[2] }, 3);
	cr_assert_eq(ax_list_pop(&l), &x[0].a);
	cr_assert_eq(ax_list_pop(&l), &x[1].a);
	cr_assert_eq(ax_list_pop(&l), &x[2].a);
	cr_assert_null(ax_list_pop(&l));
	expect(&l, NULL, 0);
}

Test(list, remove_while_iterating_and_two_lists)
{
	item    x[10];
	ax_list a = { 0 }, b = { 0 };
	item   *left[5];
	size_t  n = 0;

	for (int i = 0; i < 10; i++) {
		x[i] = (item) { .key = i };
		ax_list_append(&a, &x[i].a);
		ax_list_prepend(&b, &x[i].b);
	}
	for (ax_list_node *p = a.head, *nx; p != NULL; p = nx) {
		nx = p->next;
		if (AX_LIST_ENTRY(p, item, a)->key % 2 == 0)
			ax_list_remove(&a, p);
		else
			left[n++] = AX_LIST_ENTRY(p, item, a);
	}
	expect(&a, left, n);
	/* list B is untouched: all ten, newest first */
	int k = 9;
	for (ax_list_node *p = b.head; p != NULL; p = p->next)
		cr_assert_eq(AX_LIST_ENTRY(p, item, b)->key, k--);
	cr_assert_eq(k, -1);
}

static int
key_before(const ax_list_node *x, const ax_list_node *y)
{
	return AX_LIST_ENTRY(x, item, a)->key < AX_LIST_ENTRY(y, item, a)->key;
}

Test(list, insert_sorted_keeps_ties_in_arrival_order)
{
	static const int keys[] = { 5, 3, 5, 9, 1, 3, 5, 0, 9, 4 };
	enum { N = sizeof(keys) / sizeof(keys[0]) };
	item    x[N];
	ax_list l = { 0 };

	for (int i = 0; i < N; i++) {
		x[i] = (item) { .key = keys[i], .seq = i };
		ax_list_insert_sorted(&l, &x[i].a, key_before);
	}
	int prev_key = -1, prev_seq = -1, n = 0;
	for (ax_list_node *p = l.head; p != NULL; p = p->next, n++) {
		item *e = AX_LIST_ENTRY(p, item, a);
		cr_assert_geq(e->key, prev_key);
		if (e->key == prev_key)
			cr_assert_gt(e->seq, prev_seq, "tie out of order");
		prev_key = e->key;
		prev_seq = e->seq;
	}
	cr_assert_eq(n, N);
}
