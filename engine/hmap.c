/*
 * hmap.c - open-addressing map of entry pointers, and the string map
 * built on it (see hmap.h).
 *
 * Deletion shifts the following entries of the probe run back into the
 * hole (no tombstones), so a table that sees a million arms and disarms
 * never fills with dead slots and never needs a rebuild.
 */
#include "hmap.h"

#include <stdlib.h>
#include <string.h>

#define MIN_CAP 16

void
ax_hmap_init(ax_hmap *m, const ax_hmap_ops *ops)
{
	memset(m, 0, sizeof(*m));
	m->ops = ops;
}

void
ax_hmap_fini(ax_hmap *m)
{
	free(m->slot);
	m->slot = NULL;
	m->cap = m->n = 0;
}

static size_t
home(const ax_hmap *m, const void *entry)
{
	return (size_t) m->ops->hash_entry(entry) & (m->cap - 1);
}

/* The slot holding key, or the empty slot ending its probe run. */
static size_t
probe(const ax_hmap *m, const void *key, uint64_t h)
{
	size_t mask = m->cap - 1, i = (size_t) h & mask;

	while (m->slot[i] != NULL && !m->ops->match(m->slot[i], key))
		i = (i + 1) & mask;
	return i;
}

void *
ax_hmap_get(const ax_hmap *m, const void *key)
{
	if (m->cap == 0)
		return NULL;
	return m->slot[probe(m, key, m->ops->hash_key(key))];
}

/* Doubles the table; AX_ENOMEM leaves it as it was. */
static ax_err
grow(ax_hmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : MIN_CAP, mask = cap - 1;
	void **ns;

	if (cap < m->cap || cap > SIZE_MAX / sizeof(*ns) ||
	    (ns = calloc(cap, sizeof(*ns))) == NULL)
		return ax_err_set(AX_ENOMEM,
		                  "hash map: out of memory growing "
		                  "to %zu slots",
		                  cap);
	for (size_t j = 0; j < m->cap; j++) {
		if (m->slot[j] == NULL)
			continue;
		size_t i = (size_t) m->ops->hash_entry(m->slot[j]) & mask;
		while (ns[i] != NULL)
			i = (i + 1) & mask;
		ns[i] = m->slot[j];
	}
	free(m->slot);
	m->slot = ns;
	m->cap  = cap;
	return AX_OK;
}

ax_err
ax_hmap_reserve(ax_hmap *m, size_t n)
{
	ax_err rv;

	while (n * 4 > m->cap * 3)
		if ((rv = grow(m)) != AX_OK)
			return rv;
	return AX_OK;
}

ax_err
ax_hmap_put(ax_hmap *m, const void *key, void *entry, void **old)
{
	uint64_t h = m->ops->hash_key(key);
	size_t   i;
	ax_err   rv;

	if (old != NULL)
		*old = NULL;
	if (m->cap > 0) {
		i = probe(m, key, h);
		if (m->slot[i] != NULL) {
			if (old != NULL)
				*old = m->slot[i];
			m->slot[i] = entry;
			return AX_OK;
		}
	}
	/* at most 3/4 full; when growing fails, a fuller table still works
	 * as long as one slot stays empty (invariant 1) */
	if ((m->n + 1) * 4 > m->cap * 3 && (rv = grow(m)) != AX_OK &&
	    m->n + 2 > m->cap)
		return rv;
	i          = probe(m, key, h);
	m->slot[i] = entry;
	m->n++;
	return AX_OK;
}

/* Empties slot i and moves later entries of its run back into the hole
 * unless their home lies cyclically in (hole, j]. */
static void
del_at(ax_hmap *m, size_t i)
{
	size_t mask = m->cap - 1;

	m->slot[i] = NULL;
	m->n--;
	for (size_t j = (i + 1) & mask; m->slot[j] != NULL;
	     j        = (j + 1) & mask) {
		size_t h = home(m, m->slot[j]);
		if (i <= j ? (h <= i || h > j) : (h <= i && h > j)) {
			m->slot[i] = m->slot[j];
			m->slot[j] = NULL;
			i          = j;
		}
	}
}

void *
ax_hmap_del(ax_hmap *m, const void *key)
{
	size_t i;
	void  *e;

	if (m->cap == 0)
		return NULL;
	i = probe(m, key, m->ops->hash_key(key));
	if ((e = m->slot[i]) != NULL)
		del_at(m, i);
	return e;
}

int
ax_hmap_remove(ax_hmap *m, const void *entry)
{
	size_t mask, i;

	if (m->cap == 0 || entry == NULL)
		return 0;
	mask = m->cap - 1;
	for (i = home(m, entry); m->slot[i] != NULL; i = (i + 1) & mask)
		if (m->slot[i] == entry) {
			del_at(m, i);
			return 1;
		}
	return 0;
}

/*
 * Iteration starts after an empty slot and goes round once: backward
 * shifts never cross an empty slot, so after removing the current entry
 * the entries that move land at the current slot or later in the walk,
 * and they all come from slots not visited yet. Re-examining the current
 * slot (k - 1) is then enough to visit each entry once.
 */
void
ax_hmap_iter_init(ax_hmap_iter *it, ax_hmap *m)
{
	it->m     = m;
	it->start = 0;
	it->k     = 0;
	while (it->start < m->cap && m->slot[it->start] != NULL)
		it->start++;
}

void *
ax_hmap_iter_next(ax_hmap_iter *it)
{
	ax_hmap *m = it->m;

	while (it->k < m->cap) {
		size_t i = (it->start + ++it->k) & (m->cap - 1);
		if (m->slot[i] != NULL)
			return m->slot[i];
	}
	return NULL;
}

void
ax_hmap_iter_remove(ax_hmap_iter *it)
{
	ax_hmap *m = it->m;

	del_at(m, (it->start + it->k) & (m->cap - 1));
	it->k--;
}

uint64_t
ax_hmap_hash_str(const void *key)
{
	return ax_hash_str(key);
}

/* ---------------------------------------------------------------------- */
/* ax_strmap */

typedef struct snode {
	uint64_t hash; /* of key: no rehash on growth, cheap mismatches */
	void    *val;
	char     key[]; /* NUL-terminated */
} snode;

struct ax_strmap {
	ax_hmap m;
};

static uint64_t
snode_hash(const void *entry)
{
	return ((const snode *) entry)->hash;
}

static int
snode_match(const void *entry, const void *key)
{
	return strcmp(((const snode *) entry)->key, key) == 0;
}

static const ax_hmap_ops snode_ops = {
	.hash_key   = ax_hmap_hash_str,
	.hash_entry = snode_hash,
	.match      = snode_match,
};

ax_err
ax_strmap_new(ax_strmap **out)
{
	ax_strmap *m = calloc(1, sizeof(*m));

	*out = NULL;
	if (m == NULL)
		return ax_err_set(AX_ENOMEM, "string map: out of memory");
	ax_hmap_init(&m->m, &snode_ops);
	*out = m;
	return AX_OK;
}

void
ax_strmap_free(ax_strmap *m, void (*free_val)(void *))
{
	if (m == NULL)
		return;
	for (size_t i = 0; i < m->m.cap; i++) {
		snode *x = m->m.slot[i];
		if (x == NULL)
			continue;
		if (free_val != NULL)
			free_val(x->val);
		free(x);
	}
	ax_hmap_fini(&m->m);
	free(m);
}

void *
ax_strmap_get(const ax_strmap *m, const char *key)
{
	snode *x = ax_hmap_get(&m->m, key);
	return x != NULL ? x->val : NULL;
}

ax_err
ax_strmap_put(ax_strmap *m, const char *key, void *val)
{
	snode *x = ax_hmap_get(&m->m, key);
	size_t kl;
	ax_err rv;

	if (x != NULL) {
		x->val = val;
		return AX_OK;
	}
	kl = strlen(key);
	if ((x = malloc(sizeof(*x) + kl + 1)) == NULL)
		return ax_err_set(AX_ENOMEM, "string map: out of memory");
	memcpy(x->key, key, kl + 1);
	x->hash = ax_hash_str(key);
	x->val  = val;
	if ((rv = ax_hmap_put(&m->m, x->key, x, NULL)) != AX_OK)
		free(x);
	return rv;
}

void *
ax_strmap_del(ax_strmap *m, const char *key)
{
	snode *x = ax_hmap_del(&m->m, key);
	void  *val;

	if (x == NULL)
		return NULL;
	val = x->val;
	free(x);
	return val;
}

size_t
ax_strmap_count(const ax_strmap *m)
{
	return m->m.n;
}

void
ax_strmap_each(const ax_strmap *m,
               void (*fn)(void *arg, const char *key, void *val), void *arg)
{
	for (size_t i = 0; i < m->m.cap; i++) {
		const snode *x = m->m.slot[i];
		if (x != NULL)
			fn(arg, x->key, x->val);
	}
}

/* ---- ax_imap: slots of index + 1 ------------------------------------- */

void
ax_imap_init(ax_imap *m, const ax_imap_ops *ops, const void *ctx)
{
	memset(m, 0, sizeof(*m));
	m->ops = ops;
	m->ctx = ctx;
}

void
ax_imap_fini(ax_imap *m)
{
	free(m->slot);
	m->slot = NULL;
	m->cap = m->n = 0;
}

static size_t
ihome(const ax_imap *m, uint32_t idx)
{
	return (size_t) m->ops->hash_index(m->ctx, idx) & (m->cap - 1);
}

/* The slot holding key, or the empty slot ending its probe run. */
static size_t
iprobe(const ax_imap *m, const void *key, uint64_t h)
{
	size_t mask = m->cap - 1, i = (size_t) h & mask;
	while (m->slot[i] != 0 && !m->ops->match(m->ctx, m->slot[i] - 1, key))
		i = (i + 1) & mask;
	return i;
}

uint32_t
ax_imap_get(const ax_imap *m, const void *key)
{
	if (m->cap == 0)
		return AX_IMAP_NONE;
	return m->slot[iprobe(m, key, m->ops->hash_key(key))] - 1;
}

static ax_err
igrow(ax_imap *m)
{
	size_t    cap = m->cap ? m->cap * 2 : MIN_CAP, mask = cap - 1;
	uint32_t *ns;

	if (cap < m->cap || cap > SIZE_MAX / sizeof(*ns) ||
	    (ns = calloc(cap, sizeof(*ns))) == NULL)
		return ax_err_set(AX_ENOMEM,
		                  "index map: out of memory growing to %zu "
		                  "slots",
		                  cap);
	for (size_t j = 0; j < m->cap; j++) {
		if (m->slot[j] == 0)
			continue;
		size_t i =
		    (size_t) m->ops->hash_index(m->ctx, m->slot[j] - 1) & mask;
		while (ns[i] != 0)
			i = (i + 1) & mask;
		ns[i] = m->slot[j];
	}
	free(m->slot);
	m->slot = ns;
	m->cap  = cap;
	return AX_OK;
}

ax_err
ax_imap_reserve(ax_imap *m, size_t n)
{
	ax_err rv;

	while (n * 4 > m->cap * 3)
		if ((rv = igrow(m)) != AX_OK)
			return rv;
	return AX_OK;
}

ax_err
ax_imap_put(ax_imap *m, const void *key, uint32_t idx, uint32_t *old)
{
	uint64_t h = m->ops->hash_key(key);
	size_t   i;
	ax_err   rv;

	if (old != NULL)
		*old = AX_IMAP_NONE;
	if (idx == AX_IMAP_NONE)
		return ax_err_set(AX_EINVAL, "index map: index %u is reserved",
		                  idx);
	if (m->cap > 0) {
		i = iprobe(m, key, h);
		if (m->slot[i] != 0) {
			if (old != NULL)
				*old = m->slot[i] - 1;
			m->slot[i] = idx + 1;
			return AX_OK;
		}
	}
	if ((m->n + 1) * 4 > m->cap * 3 && (rv = igrow(m)) != AX_OK &&
	    m->n + 2 > m->cap)
		return rv;
	i          = iprobe(m, key, h);
	m->slot[i] = idx + 1;
	m->n++;
	return AX_OK;
}

int
ax_imap_remove(ax_imap *m, uint32_t idx)
{
	size_t mask, i;

	if (m->cap == 0 || idx == AX_IMAP_NONE)
		return 0;
	mask = m->cap - 1;
	for (i = ihome(m, idx); m->slot[i] != 0; i = (i + 1) & mask) {
		if (m->slot[i] != idx + 1)
			continue;
		/* backward shift, as del_at */
		m->slot[i] = 0;
		m->n--;
		for (size_t j = (i + 1) & mask; m->slot[j] != 0;
		     j        = (j + 1) & mask) {
			size_t h = ihome(m, m->slot[j] - 1);
			if (i <= j ? (h <= i || h > j) : (h <= i && h > j)) {
				m->slot[i] = m->slot[j];
				m->slot[j] = 0;
				i          = j;
			}
		}
		return 1;
	}
	return 0;
}
