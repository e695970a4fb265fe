#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <string.h>

#include "sha256.h"

struct sha_case {
	char text[160]; /* arrays, not pointers: criterion copies params */
	int  repeat;    /* text is repeated this many times */
	char hex[65];
};

ParameterizedTestParameters(sha256, nist_vectors)
{
	static struct sha_case cases[] = {
		{ "", 1,
		  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b785"
		  "2"
		  "b855" },
		{ "abc", 1,
		  "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20"
		  "0"
		  "15ad" },
		{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		  1,
		  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419d"
		  "b"
		  "06c1" },
		{ "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhij"
		  "klm"
		  "noijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
		  1,
		  "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037af"
		  "e"
		  "e9d1" },
		{ "a", 1000000,
		  "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc71"
		  "1"
		  "2cd0" },
		/* 55, 56 and 64 bytes: the padding boundaries */
		{ "a", 55,
		  "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f7"
		  "3"
		  "4318" },
		{ "a", 56,
		  "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec"
		  "6"
		  "738a" },
		{ "a", 64,
		  "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154"
		  "6"
		  "68eb" },
	};
	return cr_make_param_array(struct sha_case, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct sha_case *c, sha256, nist_vectors)
{
	ax_sha256 ctx;
	uint8_t   d[AX_SHA256_LEN];
	char      hex[AX_SHA256_HEX_LEN];
	size_t    n = strlen(c->text);

	/* feed in odd-sized pieces so block carry-over is exercised */
	ax_sha256_init(&ctx);
	for (int i = 0; i < c->repeat; i++)
		ax_sha256_update(&ctx, c->text, n);
	ax_sha256_final(&ctx, d);
	for (int i = 0; i < AX_SHA256_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
	cr_assert_str_eq(hex, c->hex, "text '%.20s' x%d", c->text, c->repeat);
	if (c->repeat == 1) {
		ax_sha256_hex(c->text, n, hex);
		cr_assert_str_eq(hex, c->hex);
	}
}

Test(sha256, split_updates_equal_one_shot)
{
	const char *msg =
	    "The quick brown fox jumps over the lazy dog, twice "
	    "over, so that the message spans two blocks of input.";
	size_t  n = strlen(msg);
	char    one[AX_SHA256_HEX_LEN], hex[AX_SHA256_HEX_LEN];
	uint8_t d[AX_SHA256_LEN];

	ax_sha256_hex(msg, n, one);
	for (size_t cut = 0; cut <= n; cut += 7) {
		ax_sha256 c;
		ax_sha256_init(&c);
		ax_sha256_update(&c, msg, cut);
		ax_sha256_update(&c, msg + cut, n - cut);
		ax_sha256_final(&c, d);
		for (int i = 0; i < AX_SHA256_LEN; i++)
			snprintf(hex + 2 * i, 3, "%02x", d[i]);
		cr_assert_str_eq(hex, one, "cut at %zu", cut);
	}
}
