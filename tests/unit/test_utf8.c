/*
 * test_utf8.c - the shared UTF-8 checks, and the error detail that uses
 * them to stay answerable as JSON whatever input it quotes.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "ax_err.h"
#include "utf8.h"

Test(utf8, sequence_lengths)
{
	cr_assert_eq(ax_utf8_seq_len("a", 1), 1);
	cr_assert_eq(ax_utf8_seq_len("\xC3\xA9", 2), 2);         /* é */
	cr_assert_eq(ax_utf8_seq_len("\xE4\xB8\x8A", 3), 3);     /* 上 */
	cr_assert_eq(ax_utf8_seq_len("\xF0\x9F\x98\x80", 4), 4); /* 😀 */
	cr_assert_eq(ax_utf8_seq_len("\xE4\xB8\x8A", 2), 0, "cut off at n");
	cr_assert_eq(ax_utf8_seq_len("\x80", 1), 0, "a continuation byte");
	cr_assert_eq(ax_utf8_seq_len("\xC0\xAF", 2), 0, "overlong /");
	cr_assert_eq(ax_utf8_seq_len("\xE0\x80\xAF", 3), 0, "overlong");
	cr_assert_eq(ax_utf8_seq_len("\xED\xA0\x80", 3), 0, "a surrogate");
	cr_assert_eq(ax_utf8_seq_len("\xF4\x90\x80\x80", 4), 0,
	             "past U+10FFFF");
	cr_assert_eq(ax_utf8_seq_len("\xFA", 1), 0);
	cr_assert_eq(ax_utf8_seq_len("", 0), 0);
}

Test(utf8, valid)
{
	cr_assert(ax_utf8_valid("Asia/Shanghai \xE4\xB8\x8A\xE6\xB5\xB7", 20));
	cr_assert(ax_utf8_valid("", 0));
	cr_assert_not(ax_utf8_valid("New_Y\xC4\x8B\xFA"
	                            "c",
	                            9));
	cr_assert_not(ax_utf8_valid("ab\xE4\xB8", 4), "ends mid-sequence");
}

Test(utf8, sanitize_escapes_bad_bytes_and_controls)
{
	char out[64];

	cr_assert_eq(ax_utf8_sanitize(out, sizeof(out),
	                              "tz 'New_Y\xC4\x8B\xFA"
	                              "c\x7F\x01'"),
	             strlen("tz 'New_Y\xC4\x8B\\xFAc\\x7F\\x01'"));
	cr_assert_str_eq(out, "tz 'New_Y\xC4\x8B\\xFAc\\x7F\\x01'");
	ax_utf8_sanitize(out, sizeof(out), "line 1\n\tline 2");
	cr_assert_str_eq(out, "line 1\n\tline 2", "tab and newline stay");
}

Test(utf8, sanitize_never_cuts_a_character_or_an_escape)
{
	char out[6];

	ax_utf8_sanitize(out, sizeof(out), "abc\xE4\xB8\x8A");
	cr_assert_str_eq(out, "abc", "no half of 上");
	ax_utf8_sanitize(out, sizeof(out), "ab\xFF\xFF");
	cr_assert_str_eq(out, "ab", "no half of \\xFF");
	ax_utf8_sanitize(out, sizeof(out), "a\xFF");
	cr_assert_str_eq(out, "a\\xFF");
}

Test(utf8, error_detail_is_always_utf8)
{
	char long_name[2000];

	ax_err_set(AX_EINVAL, "time zone '%s': unknown", "Asia/\xFA\xFB");
	cr_assert_str_eq(ax_err_detail(),
	                 "time zone 'Asia/\\xFA\\xFB': unknown");
	/* cut at the buffer's end in the middle of a character */
	memset(long_name, 'a', sizeof(long_name));
	for (size_t i = 1000; i + 3 < sizeof(long_name); i += 3)
		memcpy(long_name + i, "\xE4\xB8\x8A", 3);
	long_name[sizeof(long_name) - 1] = '\0';
	ax_err_set(AX_EINVAL, "x%s", long_name);
	cr_assert(ax_utf8_valid(ax_err_detail(), strlen(ax_err_detail())));
	cr_assert_gt(strlen(ax_err_detail()), 1000);
	/* the detail may quote the previous one */
	ax_err_set(AX_EINVAL, "inner \xFA");
	ax_err_set(AX_EPARSE, "outer: %s", ax_err_detail());
	cr_assert_str_eq(ax_err_detail(), "outer: inner \\xFA",
	                 "an escape is itself text");
}
