/*
 * hash.h - the one hash function of AX: FNV-1a 64 over the bytes, then
 * MurmurHash3's 64-bit finaliser (fmix64).
 *
 * Role: every hash table in axd (engine/hmap.h, the DAG registry, the time
 * detector, the queue service) and the routing ring (actors/support/routing.c)
 * hash with it. FNV-1a alone mixes its last bytes poorly into the low bits
 * that a power-of-two table uses; the finaliser spreads every input bit
 * over the whole word, so "dag-1" .. "dag-999999" fill buckets evenly.
 *
 * Determinism: the value depends only on the bytes (no seed, no address,
 * no endianness: bytes are read one at a time), so every process and
 * every version computes the same hash. The consistent-hash routing ring
 * relies on that: the workers chosen for a routing key must not move when
 * axd restarts. Changing this function moves routing keys between
 * workers; treat it as a wire format.
 *
 * Not adversary-proof: anyone who can choose keys can choose colliding
 * ones (FNV-1a is not a keyed hash). The keys hashed in axd are DAG and
 * task names, worker ids, run ids and instance keys. Of those, names come
 * from users, but only from holders of a token that may store DAGs, who
 * can slow axd as much by storing a million DAGs; a table degrades to a
 * linear scan of the colliding names, it does not fail. A table keyed by
 * unauthenticated input would need a keyed hash (SipHash with a per-map
 * secret); there is none today.
 *
 * Cost: about 1 ns a byte plus a few ns; no allocation; any thread.
 */
#ifndef AX_HASH_H
#define AX_HASH_H

#include <stddef.h>
#include <stdint.h>

/* The hash of n bytes at p (p may be NULL when n is 0). */
uint64_t ax_hash_bytes(const void *p, size_t n);

/* The hash of the NUL-terminated s: equals ax_hash_bytes(s, strlen(s)). */
uint64_t ax_hash_str(const char *s);

/* A 64-bit integer key (ids): the finaliser alone, a bijection. */
uint64_t ax_hash_u64(uint64_t v);

#endif /* AX_HASH_H */
