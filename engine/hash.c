/*
 * hash.c - FNV-1a 64 with a MurmurHash3 finaliser (see hash.h).
 */
#include "hash.h"

/*
 * FNV's 64-bit prime; the start value is 1469598103934665603, one digit
 * short of FNV's offset basis (14695981039346656037). Every table and the
 * routing ring of AX have always used this value: it mixes as well, and
 * changing it would move routing keys between workers (see hash.h).
 */
#define FNV_BASIS 1469598103934665603ULL
#define FNV_PRIME 1099511628211ULL

/* MurmurHash3 fmix64: every input bit reaches every output bit. */
static uint64_t
fmix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

uint64_t
ax_hash_bytes(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t             h = FNV_BASIS;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= FNV_PRIME;
	}
	return fmix64(h);
}

uint64_t
ax_hash_str(const char *s)
{
	uint64_t h = FNV_BASIS;

	for (; *s != '\0'; s++) {
		h ^= (unsigned char) *s;
		h *= FNV_PRIME;
	}
	return fmix64(h);
}

uint64_t
ax_hash_u64(uint64_t v)
{
	return fmix64(v);
}
