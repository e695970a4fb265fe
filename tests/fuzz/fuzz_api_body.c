/*
 * fuzz_api_body.c - libFuzzer target for the ax-api JSON request body
 * parsers (api-server/api_body.c): the same functions the trigger,
 * backfill, clear, mark, kill and pause/unpause handlers call before any
 * database work. Each input is tried as the body of every route.
 *
 * Checked on every input: a refusal is a 400 with a static code and a
 * non-empty detail that is valid UTF-8 (so the answer can carry it); an
 * accepted body gives the types and ranges the handler relies on
 * (params an object, instants in years 0001-9999 and formattable,
 * start <= end, a known mode and state). Never a crash, a leak or UB.
 *
 * Run: build with the `fuzz` feature (clang), then
 *   build/tests/fuzz/fuzz_api_body -max_total_time=20 \
 *       tests/fuzz/corpus_api_body
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "api_body.h"
#include "tz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_bad(const ax_api_bad *bad)
{
	json_t *d;

	if (bad->status != 400 || bad->code == NULL ||
	    bad->detail[0] == '\0' ||
	    memchr(bad->detail, '\0', sizeof(bad->detail)) == NULL)
		__builtin_trap();
	if ((d = json_string(bad->detail)) == NULL)
		__builtin_trap();
	json_decref(d);
}

static void
check_instant(int64_t us)
{
	char buf[48];

	if (us < AX_API_INSTANT_MIN || us > AX_API_INSTANT_MAX)
		__builtin_trap();
	ax_tz_format(ax_tz_utc(), us, buf, sizeof(buf));
	if (buf[0] < '0' || buf[0] > '9')
		__builtin_trap();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char          *body = (const char *) data;
	ax_api_bad           bad;
	ax_api_trigger_body  t;
	ax_api_backfill_body b;
	ax_api_clear_body    c;
	ax_api_mark_body     m;
	json_t              *j;

	memset(&bad, 0, sizeof(bad));
	if ((j = ax_api_body_parse(body, size, &bad)) == NULL)
		check_bad(&bad);
	else if (!json_is_object(j))
		__builtin_trap();
	json_decref(j);

	memset(&bad, 0, sizeof(bad));
	if (ax_api_body_trigger(body, size, &t, &bad)) {
		if (t.json == NULL ||
		    (t.params != NULL && !json_is_object(t.params)) ||
		    t.has_logical_date !=
		        (json_object_get(t.json, "logical_date") != NULL))
			__builtin_trap();
		if (t.has_logical_date)
			check_instant(t.logical_date_us);
		json_decref(t.json);
	} else {
		check_bad(&bad);
		if (t.json != NULL)
			__builtin_trap();
	}

	memset(&bad, 0, sizeof(bad));
	if (ax_api_body_backfill(body, size, &b, &bad)) {
		if (b.json == NULL || b.start == NULL || b.end == NULL ||
		    (b.params != NULL && !json_is_object(b.params)) ||
		    b.start_us > b.end_us ||
		    (strcmp(b.mode, "serial") && strcmp(b.mode, "parallel")))
			__builtin_trap();
		check_instant(b.start_us);
		check_instant(b.end_us);
		json_decref(b.json);
	} else {
		check_bad(&bad);
		if (b.json != NULL)
			__builtin_trap();
	}

	memset(&bad, 0, sizeof(bad));
	if (ax_api_body_clear(body, size, &c, &bad)) {
		if (c.json == NULL || (c.downstream != 0 && c.downstream != 1))
			__builtin_trap();
		json_decref(c.json);
	} else
		check_bad(&bad);

	memset(&bad, 0, sizeof(bad));
	if (ax_api_body_mark(body, size, &m, &bad)) {
		if (m.json == NULL ||
		    (m.state != AX_TI_SUCCESS && m.state != AX_TI_FAILED))
			__builtin_trap();
		json_decref(m.json);
	} else
		check_bad(&bad);

	memset(&bad, 0, sizeof(bad));
	if (!ax_api_body_none(body, size, &bad))
		check_bad(&bad);
	return 0;
}
