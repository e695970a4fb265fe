/*
 * test_hmap.c - the hash map: node-less mode over many resizes, under
 * every hash shape (good, all colliding, runs that wrap past the last
 * slot), replacement, removal by key and by pointer, removal during
 * iteration, checked against a plain reference; and the string map.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"

typedef struct ent {
	char name[24];
	int  id;
	int  in;   /* reference: 1 while it should be in the map */
	int  seen; /* visits in one iteration */
} ent;

/* The hash shapes under test; the key is always the name. */
static uint64_t
h_good(const char *s)
{
	return ax_hash_str(s);
}
static uint64_t
h_const(const char *s)
{
	(void) s;
	return 7; /* every key in one probe run */
}
static uint64_t
h_last(const char *s)
{
	/* homes in the last 4 slots: runs wrap round to slot 0 */
	return UINT64_MAX - (ax_hash_str(s) & 3);
}
static uint64_t
h_few(const char *s)
{
	return ax_hash_str(s) & 0x30; /* 4 homes: long interleaved runs */
}

static uint64_t (*shape)(const char *);

static uint64_t
k_hash(const void *key)
{
	return shape(key);
}
static uint64_t
e_hash(const void *e)
{
	return shape(((const ent *) e)->name);
}
static int
e_match(const void *e, const void *key)
{
	return strcmp(((const ent *) e)->name, key) == 0;
}

static const ax_hmap_ops ops = {
	.hash_key   = k_hash,
	.hash_entry = e_hash,
	.match      = e_match,
};

typedef struct shape_case {
	const char *name;
	uint64_t (*fn)(const char *);
	int n; /* entries: fewer for the quadratic shapes */
} shape_case;

static shape_case shapes[] = {
	{ "good", h_good, 100000 },
	{ "const", h_const, 600 },
	{ "last", h_last, 600 },
	{ "few", h_few, 2000 },
};

/* criterion copies parameters into another process: indices into
 * shapes[], not pointers */
static int shape_ix[] = { 0, 1, 2, 3 };

ParameterizedTestParameters(hmap, against_reference)
{
	return cr_make_param_array(int, shape_ix,
	                           sizeof(shape_ix) / sizeof(shape_ix[0]));
}

static ent *
mk(int n)
{
	ent *v = calloc((size_t) n, sizeof(*v));
	cr_assert_not_null(v);
	for (int i = 0; i < n; i++) {
		snprintf(v[i].name, sizeof(v[i].name), "dag-%d", i);
		v[i].id = i;
	}
	return v;
}

static void
check(const ax_hmap *m, ent *v, int n)
{
	size_t in = 0;
	for (int i = 0; i < n; i++) {
		ent *e = ax_hmap_get(m, v[i].name);
		if (v[i].in) {
			in++;
			cr_assert_eq(e, &v[i], "%s missing", v[i].name);
		} else {
			cr_assert_null(e, "%s still there", v[i].name);
		}
	}
	cr_assert_eq(ax_hmap_count(m), in);
	/* invariant 1 and the load bound */
	cr_assert(m->cap == 0 || (m->cap & (m->cap - 1)) == 0);
	cr_assert(m->cap == 0 || m->n * 4 <= m->cap * 3);
}

ParameterizedTest(int *ix, hmap, against_reference)
{
	shape_case *c = &shapes[*ix];
	ax_hmap     m;
	int         n    = c->n;
	ent        *v    = mk(n);
	size_t      caps = 0, last = 0;

	shape = c->fn;
	ax_hmap_init(&m, &ops);
	cr_assert_null(ax_hmap_get(&m, "dag-0"));
	cr_assert_null(ax_hmap_del(&m, "dag-0"));
	for (int i = 0; i < n; i++) {
		void *old = &old;
		cr_assert_eq(ax_hmap_put(&m, v[i].name, &v[i], &old), AX_OK);
		cr_assert_null(old);
		v[i].in = 1;
		if (m.cap != last) {
			caps++;
			last = m.cap;
		}
	}
	cr_assert_geq(caps, 5, "%zu resizes", caps);
	check(&m, v, n);
	/* remove a pseudo-random 2/3, by key and by pointer */
	srand(12345);
	for (int i = 0; i < n; i++) {
		int j = rand() % n;
		if (!v[j].in || rand() % 3 == 0)
			continue;
		if (j % 2)
			cr_assert_eq(ax_hmap_del(&m, v[j].name), &v[j]);
		else
			cr_assert_eq(ax_hmap_remove(&m, &v[j]), 1);
		cr_assert_eq(ax_hmap_remove(&m, &v[j]), 0);
		v[j].in = 0;
	}
	check(&m, v, n);
	/* put back some: same table, no growth needed */
	for (int i = 0; i < n; i += 5)
		if (!v[i].in) {
			cr_assert_eq(ax_hmap_put(&m, v[i].name, &v[i], NULL),
			             AX_OK);
			v[i].in = 1;
		}
	check(&m, v, n);
	ax_hmap_fini(&m);
	cr_assert_eq(ax_hmap_count(&m), 0);
	cr_assert_null(ax_hmap_get(&m, "dag-1"));
	free(v);
}

Test(hmap, put_replaces_and_remove_is_by_pointer)
{
	ax_hmap m;
	ent     a = { .name = "same" }, b = { .name = "same" };
	void   *old;

	shape = h_good;
	ax_hmap_init(&m, &ops);
	cr_assert_eq(ax_hmap_put(&m, a.name, &a, &old), AX_OK);
	cr_assert_null(old);
	cr_assert_eq(ax_hmap_put(&m, b.name, &b, &old), AX_OK);
	cr_assert_eq(old, &a);
	cr_assert_eq(ax_hmap_count(&m), 1);
	cr_assert_eq(ax_hmap_get(&m, "same"), &b);
	/* a is not in the map any more: removing it keeps b */
	cr_assert_eq(ax_hmap_remove(&m, &a), 0);
	cr_assert_eq(ax_hmap_get(&m, "same"), &b);
	cr_assert_eq(ax_hmap_remove(&m, &b), 1);
	cr_assert_null(ax_hmap_get(&m, "same"));
	ax_hmap_fini(&m);
}

Test(hmap, reserve_then_puts_do_not_grow)
{
	ax_hmap m;
	ent    *v = mk(1000);
	void  **slots;

	shape = h_good;
	ax_hmap_init(&m, &ops);
	cr_assert_eq(ax_hmap_reserve(&m, 1000), AX_OK);
	cr_assert_geq(m.cap * 3, 1000 * 4);
	slots = m.slot;
	for (int i = 0; i < 1000; i++)
		cr_assert_eq(ax_hmap_put(&m, v[i].name, &v[i], NULL), AX_OK);
	cr_assert_eq(m.slot, slots, "the table moved: a put grew it");
	cr_assert_eq(ax_hmap_reserve(&m, 10), AX_OK); /* never shrinks */
	cr_assert_eq(m.slot, slots);
	for (int i = 0; i < 1000; i++)
		cr_assert_eq(ax_hmap_get(&m, v[i].name), &v[i]);
	ax_hmap_fini(&m);
	free(v);
}

ParameterizedTestParameters(hmap, remove_during_iteration)
{
	return cr_make_param_array(int, shape_ix,
	                           sizeof(shape_ix) / sizeof(shape_ix[0]));
}

/* Every entry is visited exactly once while the iteration removes some
 * of them (every third, and runs of neighbours), whatever the shape. */
ParameterizedTest(int *ix, hmap, remove_during_iteration)
{
	shape_case  *c = &shapes[*ix];
	ax_hmap      m;
	ax_hmap_iter it;
	int          n       = c->n > 5000 ? 5000 : c->n;
	ent         *v       = mk(n), *e;
	size_t       visited = 0;

	shape = c->fn;
	ax_hmap_init(&m, &ops);
	for (int i = 0; i < n; i++) {
		cr_assert_eq(ax_hmap_put(&m, v[i].name, &v[i], NULL), AX_OK);
		v[i].in = 1;
	}
	ax_hmap_iter_init(&it, &m);
	while ((e = ax_hmap_iter_next(&it)) != NULL) {
		e->seen++;
		visited++;
		if (e->id % 3 == 0 || (e->id / 50) % 2 == 0) {
			ax_hmap_iter_remove(&it);
			e->in = 0;
		}
	}
	cr_assert_eq(visited, (size_t) n);
	for (int i = 0; i < n; i++)
		cr_assert_eq(v[i].seen, 1, "%s seen %d times", v[i].name,
		             v[i].seen);
	check(&m, v, n);
	/* a second pass removes the rest */
	ax_hmap_iter_init(&it, &m);
	while ((e = ax_hmap_iter_next(&it)) != NULL) {
		ax_hmap_iter_remove(&it);
		e->in = 0;
	}
	cr_assert_eq(ax_hmap_count(&m), 0);
	check(&m, v, n);
	ax_hmap_fini(&m);
	free(v);
}

Test(hmap, iterate_empty)
{
	ax_hmap      m;
	ax_hmap_iter it;

	ax_hmap_init(&m, &ops);
	ax_hmap_iter_init(&it, &m);
	cr_assert_null(ax_hmap_iter_next(&it));
	ax_hmap_fini(&m);
}

/* ---------------------------------------------------------------------- */
/* ax_strmap */

static int freed;

static void
count_free(void *p)
{
	freed++;
	free(p);
}

static void
sum_each(void *arg, const char *key, void *val)
{
	long *sum = arg;
	cr_assert_eq(strncmp(key, "k", 1), 0);
	*sum += *(int *) val;
}

Test(strmap, put_get_del_each_free)
{
	ax_strmap *m;
	char       key[32];
	long       sum = 0, want = 0;

	cr_assert_eq(ax_strmap_new(&m), AX_OK);
	cr_assert_null(ax_strmap_get(m, "k1"));
	for (int i = 0; i < 10000; i++) {
		int *v = malloc(sizeof(*v));
		*v     = i;
		snprintf(key, sizeof(key), "k%d", i);
		cr_assert_eq(ax_strmap_put(m, key, v), AX_OK);
	}
	cr_assert_eq(ax_strmap_count(m), 10000);
	/* the key was copied: the buffer is reused above */
	cr_assert_eq(*(int *) ax_strmap_get(m, "k7777"), 7777);
	/* replacing keeps the count and returns nothing to free */
	int *r = malloc(sizeof(*r));
	*r     = -1;
	free(ax_strmap_get(m, "k5"));
	cr_assert_eq(ax_strmap_put(m, "k5", r), AX_OK);
	cr_assert_eq(ax_strmap_count(m), 10000);
	cr_assert_eq(*(int *) ax_strmap_get(m, "k5"), -1);
	for (int i = 0; i < 10000; i += 2) {
		snprintf(key, sizeof(key), "k%d", i);
		free(ax_strmap_del(m, key));
		cr_assert_null(ax_strmap_get(m, key));
	}
	cr_assert_null(ax_strmap_del(m, "k0"));
	cr_assert_eq(ax_strmap_count(m), 5000);
	ax_strmap_each(m, sum_each, &sum);
	for (int i = 1; i < 10000; i += 2)
		want += i == 5 ? -1 : i;
	cr_assert_eq(sum, want);
	freed = 0;
	ax_strmap_free(m, count_free);
	cr_assert_eq(freed, 5000);
	ax_strmap_free(NULL, count_free);
}

Test(strmap, empty_key_and_long_key)
{
	ax_strmap *m;
	char       big[4096];
	int        a = 1, b = 2;

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	cr_assert_eq(ax_strmap_new(&m), AX_OK);
	cr_assert_eq(ax_strmap_put(m, "", &a), AX_OK);
	cr_assert_eq(ax_strmap_put(m, big, &b), AX_OK);
	cr_assert_eq(ax_strmap_get(m, ""), &a);
	cr_assert_eq(ax_strmap_get(m, big), &b);
	big[100] = 'y';
	cr_assert_null(ax_strmap_get(m, big));
	ax_strmap_free(m, NULL);
}

/* --- ax_imap: indexes into the owner's array ---------------------------- */

typedef struct iowner {
	char names[3000][16];
	int  hash_calls;
} iowner;

static uint64_t
iown_hash(const void *ctx, uint32_t idx)
{
	iowner *o = (iowner *) ctx;
	o->hash_calls++;
	return ax_hash_str(o->names[idx]);
}

static int
iown_match(const void *ctx, uint32_t idx, const void *key)
{
	return strcmp(((const iowner *) ctx)->names[idx], key) == 0;
}

static const ax_imap_ops iown_ops = {
	.hash_key   = ax_hmap_hash_str,
	.hash_index = iown_hash,
	.match      = iown_match,
};

static iowner iown;

Test(imap, put_get_replace_remove)
{
	ax_imap  m;
	uint32_t old;

	ax_imap_init(&m, &iown_ops, &iown);
	cr_assert_eq(ax_imap_get(&m, "a"), AX_IMAP_NONE, "empty map");
	cr_assert_eq(ax_imap_remove(&m, 0), 0);
	strcpy(iown.names[0], "a");
	strcpy(iown.names[1], "b");
	strcpy(iown.names[2], "a"); /* a second record with key "a" */
	cr_assert_eq(ax_imap_put(&m, "a", 0, &old), AX_OK);
	cr_assert_eq(old, AX_IMAP_NONE);
	cr_assert_eq(ax_imap_put(&m, "b", 1, NULL), AX_OK);
	cr_assert_eq(ax_imap_get(&m, "a"), 0);
	cr_assert_eq(ax_imap_get(&m, "b"), 1);
	cr_assert_eq(ax_imap_put(&m, "a", 2, &old), AX_OK);
	cr_assert_eq(old, 0, "an equal key is replaced");
	cr_assert_eq(ax_imap_count(&m), 2);
	cr_assert_eq(ax_imap_get(&m, "a"), 2);
	cr_assert_eq(ax_imap_remove(&m, 0), 0, "0 was replaced: not there");
	cr_assert_eq(ax_imap_remove(&m, 2), 1);
	cr_assert_eq(ax_imap_get(&m, "a"), AX_IMAP_NONE);
	cr_assert_eq(ax_imap_put(&m, "x", AX_IMAP_NONE, NULL), AX_EINVAL);
	cr_assert_eq(ax_imap_count(&m), 1);
	ax_imap_fini(&m);
	ax_imap_fini(&m); /* twice is fine */
}

/* 3000 keys, every other one removed (backward shifts through long probe
 * runs), the rest still found, the removed ones not; 4 bytes a slot. */
Test(imap, many_keys_with_removals)
{
	ax_imap m;

	ax_imap_init(&m, &iown_ops, &iown);
	for (uint32_t i = 0; i < 3000; i++) {
		snprintf(iown.names[i], sizeof(iown.names[i]), "k%u", i);
		cr_assert_eq(ax_imap_put(&m, iown.names[i], i, NULL), AX_OK);
	}
	cr_assert_eq(ax_imap_count(&m), 3000);
	cr_assert_eq(m.cap, 4096);
	for (uint32_t i = 0; i < 3000; i += 2)
		cr_assert_eq(ax_imap_remove(&m, i), 1, "k%u", i);
	for (uint32_t i = 0; i < 3000; i++)
		cr_assert_eq(ax_imap_get(&m, iown.names[i]),
		             i % 2 ? i : AX_IMAP_NONE, "k%u", i);
	cr_assert_eq(ax_imap_count(&m), 1500);
	ax_imap_fini(&m);
}

Test(imap, reserve_then_puts_do_not_grow)
{
	ax_imap m;

	ax_imap_init(&m, &iown_ops, &iown);
	cr_assert_eq(ax_imap_reserve(&m, 100), AX_OK);
	size_t cap = m.cap;
	cr_assert_geq(cap * 3, 100 * 4);
	iown.hash_calls = 0;
	for (uint32_t i = 0; i < 100; i++) {
		snprintf(iown.names[i], sizeof(iown.names[i]), "r%u", i);
		cr_assert_eq(ax_imap_put(&m, iown.names[i], i, NULL), AX_OK);
	}
	cr_assert_eq(m.cap, cap, "grew after reserve");
	cr_assert_eq(iown.hash_calls, 0, "no rehash of an entry");
	ax_imap_fini(&m);
}
