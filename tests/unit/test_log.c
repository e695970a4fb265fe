#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static char *
capture(void (*fn)(void))
{
	static char out[8192];
	int         fds[2];
	ssize_t     n;

	cr_assert_eq(pipe(fds), 0);
	ax_log_init(AX_LOG_INFO, fds[1]);
	fn();
	close(fds[1]);
	n = read(fds[0], out, sizeof(out) - 1);
	close(fds[0]);
	ax_log_init(AX_LOG_INFO, 2);
	out[n < 0 ? 0 : n] = '\0';
	return out;
}

static void
emit_with_ids(void)
{
	ax_log_ids ids = { .dag      = "ods.orders",
		           .run      = 7,
		           .instance = 42,
		           .run_id   = "abc",
		           .attempt  = 2 };
	ax_logf(AX_LOG_WARN, "dependency_detector", "WAIT_DEPENDENCY", &ids,
	        "waiting on \"%s\"\n", "a");
	ax_log_debug("x", "dropped below the level");
}

Test(log, one_json_object_per_line_with_ids_and_reason)
{
	char *s = capture(emit_with_ids);
	cr_assert(strchr(s, '\n') == s + strlen(s) - 1, "one line: %s", s);
	cr_assert(strstr(s, "\"level\":\"warn\"") != NULL, "%s", s);
	cr_assert(strstr(s, "\"component\":\"dependency_detector\"") != NULL);
	cr_assert(strstr(s, "\"reason\":\"WAIT_DEPENDENCY\"") != NULL);
	cr_assert(strstr(s, "\"msg\":\"waiting on \\\"a\\\"\\n\"") != NULL,
	          "%s", s);
	cr_assert(strstr(s,
	                 "\"dag\":\"ods.orders\",\"run\":7,"
	                 "\"instance\":42,\"run_id\":\"abc\","
	                 "\"attempt\":2}") != NULL,
	          "%s", s);
}

Test(log, escape_replaces_invalid_utf8_and_controls)
{
	char   buf[64];
	size_t n = ax_json_escape(buf, 0, sizeof(buf), "a\x01\xff\xc3\xa9");
	cr_assert_str_eq(buf, "a\\u0001\\ufffd\xc3\xa9");
	cr_assert_eq(n, strlen(buf));
}

Test(log, level_parse)
{
	cr_assert_eq(ax_log_level_parse("debug"), AX_LOG_DEBUG);
	cr_assert_eq(ax_log_level_parse("WARNING"), AX_LOG_WARN);
	cr_assert_eq(ax_log_level_parse("loud"), -1);
}

/* What the event store splices into jsonb without a JSON library must be
 * exactly what jsonb accepts: anything else takes the slow path. */
Test(log, json_object_valid_accepts_only_what_jsonb_takes)
{
	static const char *const good[] = {
		"{}",
		" { } \n",
		"{\"a\":1}",
		"{\"from\":\"READY\",\"to\":\"SUCCESS\",\"report\":{"
		"\"status\":"
		"\"SUCCESS\",\"exit\":0,\"log\":\"/l\"}}",
		"{\"n\":-0.5e+10,\"t\":true,\"f\":false,\"z\":null,\"a\":[1,[]"
		",{}]}",
		"{\"big\":1e999,\"small\":-1.5E-999}",
		"{\"s\":\"caf\xc3\xa9 \\u00e9 \\ud83d\\ude00 \\\" \\\\ \\/ "
		"\\n\"}",
	};
	static const char *const bad[] = {
		"",
		"[]",
		"\"s\"",
		"{",
		"{\"a\":1,}",
		"{\"a\":1}x",
		"{\"a\":1}{}",
		"{a:1}",
		"{\"a\":01}",
		"{\"a\":-}",
		"{\"a\":1.}",
		"{\"a\":1e}",
		"{\"a\":tru}",
		"{\"a\":\"\\u0000\"}",        /* jsonb refuses it */
		"{\"a\":\"\\ud800\"}",        /* unpaired high surrogate */
		"{\"a\":\"\\udc00\"}",        /* low surrogate alone */
		"{\"a\":\"\\ud800\\u0041\"}", /* high, then not a low one */
		"{\"a\":\"\\x\"}",
		"{\"a\":\"\\u12g4\"}",
		"{\"a\":\"tab\there\"}", /* raw control character */
		"{\"a\":\"\xff\"}",      /* invalid UTF-8 */
		"{\"a\":\"\xc0\xaf\"}",  /* overlong */
		"{\"a\":\"unterminated}",
		"{\"a\":1e1000}", /* past what the check lets through */
		"{\"a\":1e-200000}",
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		cr_assert(ax_json_object_valid(good[i]), "good %zu: %s", i,
		          good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert(!ax_json_object_valid(bad[i]), "bad %zu: %s", i,
		          bad[i]);
	cr_assert(!ax_json_object_valid(NULL));
	/* 1000 digits before the point are fine, 1001 are not */
	for (int digits = 1000; digits <= 1001; digits++) {
		char num[1100];
		memcpy(num, "{\"a\":", 5);
		memset(num + 5, '7', (size_t) digits);
		memcpy(num + 5 + digits, "}", 2);
		cr_assert_eq(ax_json_object_valid(num), digits == 1000,
		             "%d digits", digits);
	}
	/* 64 levels of objects are fine, 65 are not */
	for (int levels = 64; levels <= 65; levels++) {
		char   deep[512];
		size_t n = 0;
		for (int d = 1; d < levels; d++) {
			memcpy(deep + n, "{\"k\":", 5);
			n += 5;
		}
		deep[n++] = '{';
		deep[n++] = '}';
		for (int d = 1; d < levels; d++)
			deep[n++] = '}';
		deep[n] = '\0';
		cr_assert_eq(ax_json_object_valid(deep), levels == 64,
		             "%d levels", levels);
	}
}
