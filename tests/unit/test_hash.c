/*
 * test_hash.c - the one hash function: fixed values (the routing ring of
 * every process and version depends on them), bytes and strings agree,
 * and the low bits that power-of-two tables use spread evenly.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <string.h>

#include "hash.h"

typedef struct vec {
	char     s[24]; /* arrays, not pointers: criterion copies params */
	uint64_t h;
} vec;

/* Computed independently (Python) from the definition in hash.c:
 * FNV-1a 64 from 1469598103934665603, then MurmurHash3's fmix64. */
static vec vecs[] = {
	{ "", 0xd725c98e9509182eULL },
	{ "a", 0x43a941547f0150e5ULL },
	{ "foobar", 0x4ecf6950caf6228cULL },
	{ "dag-1", 0xd6eaa3da3392b05bULL },
	{ "worker-17\x1fkey", 0xaa4a37d92c335bf8ULL },
	{ "\xc3\xa9", 0x01bab0fdf108d468ULL },
};

ParameterizedTestParameters(hash, fixed_values)
{
	return cr_make_param_array(vec, vecs, sizeof(vecs) / sizeof(vecs[0]));
}

ParameterizedTest(vec *v, hash, fixed_values)
{
	cr_assert_eq(ax_hash_str(v->s), v->h, "\"%s\": %016llx", v->s,
	             (unsigned long long) ax_hash_str(v->s));
	cr_assert_eq(ax_hash_bytes(v->s, strlen(v->s)), v->h);
}

Test(hash, u64_is_the_finaliser)
{
	cr_assert_eq(ax_hash_u64(0), 0);
	cr_assert_eq(ax_hash_u64(1), 0xb456bcfc34c2cb2cULL);
	cr_assert_eq(ax_hash_u64(42), 0x810879608e4259ccULL);
	cr_assert_neq(ax_hash_u64(2), ax_hash_u64(3));
}

Test(hash, bytes_see_embedded_nuls)
{
	cr_assert_neq(ax_hash_bytes("a\0b", 3), ax_hash_bytes("a\0c", 3));
	cr_assert_neq(ax_hash_bytes("a\0b", 3), ax_hash_str("a"));
	cr_assert_eq(ax_hash_bytes(NULL, 0), ax_hash_str(""));
}

/* Pearson's chi-square of 100,000 sequential names over 1,024 buckets:
 * about 1,023 +- 45 for an even spread. Both the low bits (power-of-two
 * tables) and the high bits must pass; FNV-1a alone scores about 73,000
 * on the high bits of these names. */
static double
chi2(int shift)
{
	static unsigned bucket[1024];
	char            name[32];
	double          e = 100000.0 / 1024, x = 0;

	memset(bucket, 0, sizeof(bucket));
	for (int i = 0; i < 100000; i++) {
		snprintf(name, sizeof(name), "dag-%d", i);
		bucket[(ax_hash_str(name) >> shift) & 1023]++;
	}
	for (int i = 0; i < 1024; i++)
		x += (bucket[i] - e) * (bucket[i] - e) / e;
	return x;
}

Test(hash, bits_spread)
{
	cr_assert_lt(chi2(0), 1300.0, "low bits: chi2 %.0f", chi2(0));
	cr_assert_lt(chi2(54), 1300.0, "high bits: chi2 %.0f", chi2(54));
}
