/*
 * hmap.h - the hash map of AX, in two modes.
 *
 * 1. ax_hmap, node-less: an open-addressing table of pointers to the
 *    caller's entries (linear probing, backward-shift deletion, at most
 *    3/4 full). Each entry holds its own key; the map stores only the
 *    pointer (8 bytes a slot, 10.7 to 21.3 bytes an entry between two
 *    doublings) and allocates nothing per entry. The caller describes its
 *    entries with an ax_hmap_ops (hash of a key, hash of an entry's key,
 *    does an entry have this key). Built for the time detector's million
 *    armed schedules and for entries that already carry their name (queue
 *    attempts, workers, DAG versions).
 *
 * 2. ax_strmap, convenient: NUL-terminated string keys (copied) to void *
 *    values; one allocation per entry (key and value together). For the
 *    actors' small indexes where an entry type of its own is not worth it.
 *
 * 3. ax_imap, index mode: slots of 32-bit indexes into the owner's array,
 *    callbacks with the owner's context (see below).
 *
 * Hash: ax_hash_bytes / ax_hash_str (hash.h), deterministic and not
 * adversary-proof (see hash.h for why that is acceptable for the keys
 * axd hashes).
 *
 * Invariants of ax_hmap:
 *  1. cap is 0 or a power of two, and n < cap whenever cap > 0: at least
 *     one slot is empty, so every probe ends.
 *  2. Every entry sits in the probe run that starts at its home slot
 *     (hash & (cap - 1)) with no empty slot between home and it.
 *  3. No two entries have equal keys (put replaces).
 *
 * Iteration (ax_hmap_iter) visits every entry once. While iterating, the
 * only change allowed is ax_hmap_iter_remove() of the entry just
 * returned: every other entry is still visited exactly once. An insert
 * or any other removal during an iteration may skip or repeat entries.
 * ax_strmap_each must not change the map at all.
 *
 * Cost: get, put, del O(1) expected; growth doubles and rehashes every
 * entry (ax_hmap calls hash_entry once per entry). The tables never
 * shrink. Threads: none of this locks; one owner at a time.
 */
#ifndef AX_HMAP_H
#define AX_HMAP_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "hash.h"

/* How a map finds the key of its entries (const, static storage). */
typedef struct ax_hmap_ops {
	uint64_t (*hash_key)(const void *key);     /* of a lookup key */
	uint64_t (*hash_entry)(const void *entry); /* of the entry's key */
	int (*match)(const void *entry, const void *key); /* 1: same key */
} ax_hmap_ops;

/* Embedded by its owner; zeroed memory plus ops (ax_hmap_init) is an
 * empty map. */
typedef struct ax_hmap {
	void             **slot; /* cap entries or NULL */
	size_t             cap;  /* 0 or a power of two */
	size_t             n;    /* entries */
	const ax_hmap_ops *ops;
} ax_hmap;

/* An empty map over ops (which must outlive it). Allocates nothing. */
void ax_hmap_init(ax_hmap *m, const ax_hmap_ops *ops);

/* Frees the table (not the entries); m is empty afterwards. Safe on
 * zeroed memory. */
void ax_hmap_fini(ax_hmap *m);

/* The entry with key, or NULL. */
void *ax_hmap_get(const ax_hmap *m, const void *key);

/*
 * Adds entry under key (key must be entry's key: what hash_entry and
 * match see). An entry with an equal key is replaced and returned in
 * *old (NULL when there was none; old may be NULL). AX_ENOMEM when the
 * table must grow and cannot (m unchanged, *old NULL).
 */
ax_err ax_hmap_put(ax_hmap *m, const void *key, void *entry, void **old);

/*
 * Makes room for n entries in all, so that puts up to that count cannot
 * fail: for callers that must not fail half-way through a change (take
 * the room first, then change). AX_ENOMEM (m unchanged).
 */
ax_err ax_hmap_reserve(ax_hmap *m, size_t n);

/* Removes the entry with key; returns it (NULL when absent). */
void *ax_hmap_del(ax_hmap *m, const void *key);

/* Removes entry itself (found by pointer, not by key: another entry with
 * an equal key stays). 1 when it was in the map, else 0. */
int ax_hmap_remove(ax_hmap *m, const void *entry);

static inline size_t
ax_hmap_count(const ax_hmap *m)
{
	return m->n;
}

/* Iteration state (see the file comment for what may change). */
typedef struct ax_hmap_iter {
	ax_hmap *m;
	size_t   start; /* an empty slot: no probe run crosses it */
	size_t   k;     /* slots visited since start */
} ax_hmap_iter;

void ax_hmap_iter_init(ax_hmap_iter *it, ax_hmap *m);

/* The next entry, or NULL at the end. */
void *ax_hmap_iter_next(ax_hmap_iter *it);

/* Removes the entry the last ax_hmap_iter_next returned (which must not
 * be NULL); the iteration goes on with the entries not visited yet. */
void ax_hmap_iter_remove(ax_hmap_iter *it);

/* String-keyed ops helpers: hash and compare NUL-terminated keys. */
uint64_t ax_hmap_hash_str(const void *key);

/* ---------------------------------------------------------------------- */
/* ax_strmap: string key (copied) -> value */

typedef struct ax_strmap ax_strmap;

/* Creates an empty map. AX_ENOMEM. */
ax_err ax_strmap_new(ax_strmap **out);

/* Frees the map; free_val (may be NULL) is called on every value. NULL
 * is fine. */
void ax_strmap_free(ax_strmap *m, void (*free_val)(void *));

/* The value of key, or NULL. */
void *ax_strmap_get(const ax_strmap *m, const char *key);

/* Sets key (copied) to val, replacing any value. AX_ENOMEM (m
 * unchanged). */
ax_err ax_strmap_put(ax_strmap *m, const char *key, void *val);

/* Removes key; returns its value (NULL when absent). */
void *ax_strmap_del(ax_strmap *m, const char *key);

size_t ax_strmap_count(const ax_strmap *m);

/* Calls fn(arg, key, val) for every entry; fn must not change the map. */
void ax_strmap_each(const ax_strmap *m,
                    void (*fn)(void *arg, const char *key, void *val),
                    void *arg);

/* ---------------------------------------------------------------------- */
/*
 * ax_imap, index mode: the node-less map again, but its slots hold 32-bit
 * indexes into the owner's own array (4 bytes a slot, 5.3 to 10.7 bytes
 * an entry) and its callbacks get the owner's context, so an entry needs
 * neither a pointer nor a copy of its key: for a million records that
 * already sit in a dense array (the time detector's schedules). Same
 * probing, deletion and invariants as ax_hmap; indexes 0 to
 * UINT32_MAX - 1.
 */

#define AX_IMAP_NONE UINT32_MAX

typedef struct ax_imap_ops {
	uint64_t (*hash_key)(const void *key);
	uint64_t (*hash_index)(const void *ctx, uint32_t idx); /* its key's */
	int (*match)(const void *ctx, uint32_t idx, const void *key);
} ax_imap_ops;

typedef struct ax_imap {
	uint32_t          *slot; /* index + 1; 0: empty */
	size_t             cap;  /* 0 or a power of two */
	size_t             n;
	const ax_imap_ops *ops;
	const void        *ctx; /* handed to hash_index and match */
} ax_imap;

/* An empty map; ops and ctx must outlive it. Allocates nothing. */
void ax_imap_init(ax_imap *m, const ax_imap_ops *ops, const void *ctx);

/* Frees the table; safe on zeroed memory. */
void ax_imap_fini(ax_imap *m);

/* The index stored under key, or AX_IMAP_NONE. */
uint32_t ax_imap_get(const ax_imap *m, const void *key);

/*
 * Stores idx under key (key must be idx's key as hash_index and match
 * see it), replacing the index an equal key had (returned in *old, else
 * AX_IMAP_NONE; old may be NULL). AX_EINVAL for idx AX_IMAP_NONE,
 * AX_ENOMEM (m unchanged).
 */
ax_err ax_imap_put(ax_imap *m, const void *key, uint32_t idx, uint32_t *old);

/* Room for n entries in all: puts up to that count cannot fail. */
ax_err ax_imap_reserve(ax_imap *m, size_t n);

/* Removes idx itself (found through hash_index). 1 when it was there. */
int ax_imap_remove(ax_imap *m, uint32_t idx);

static inline size_t
ax_imap_count(const ax_imap *m)
{
	return m->n;
}

#endif /* AX_HMAP_H */
