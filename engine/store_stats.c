/*
 * store_stats.c - upsert of component_stats (see store_stats.h).
 *
 * The rows travel as three PostgreSQL array literals (text[], text[],
 * bigint[]) unnested by one statement, so n counters cost one round trip.
 */
#include "store_stats.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SQL                                                                   \
	"INSERT INTO component_stats (component, key, value, updated_at) "    \
	"SELECT c, k, v, now() FROM unnest($1::text[], $2::text[], "          \
	"$3::bigint[]) AS t(c, k, v) "                                        \
	"ON CONFLICT (component, key) DO UPDATE SET value = "                 \
	"EXCLUDED.value, updated_at = EXCLUDED.updated_at"

/* A PostgreSQL array literal being built. */
typedef struct lit {
	char  *buf;
	size_t len, cap, n;
	int    oom;
} lit;

static void
put(lit *a, const char *s, size_t n)
{
	if (a->oom)
		return;
	if (a->len + n + 1 > a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 256;
		char  *b;
		while (cap < a->len + n + 1)
			cap *= 2;
		if ((b = realloc(a->buf, cap)) == NULL) {
			a->oom = 1;
			return;
		}
		a->buf = b;
		a->cap = cap;
	}
	memcpy(a->buf + a->len, s, n);
	a->len += n;
	a->buf[a->len] = '\0';
}

static void
put_text(lit *a, const char *s)
{
	put(a, a->n++ == 0 ? "{\"" : ",\"", 2);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			put(a, "\\", 1);
		put(a, s, 1);
	}
	put(a, "\"", 1);
}

static void
put_int(lit *a, int64_t v)
{
	char b[24];
	int  n = snprintf(b, sizeof(b), "%" PRId64, v);
	put(a, a->n++ == 0 ? "{" : ",", 1);
	put(a, b, (size_t) n);
}

ax_err
ax_store_stats_put(ax_store *s, const ax_store_stat *rows, size_t n)
{
	lit    c = { 0 }, k = { 0 }, v = { 0 };
	ax_err rv;

	if (n == 0)
		return AX_OK;
	for (size_t i = 0; i < n; i++) {
		if (rows[i].component == NULL || rows[i].component[0] == '\0')
			return ax_err_set(AX_EINVAL,
			                  "component_stats row %zu: empty "
			                  "component",
			                  i);
		if (rows[i].key == NULL || rows[i].key[0] == '\0')
			return ax_err_set(
			    AX_EINVAL,
			    "component_stats row %zu (%s): empty "
			    "key",
			    i, rows[i].component);
		put_text(&c, rows[i].component);
		put_text(&k, rows[i].key);
		put_int(&v, rows[i].value);
	}
	put(&c, "}", 1);
	put(&k, "}", 1);
	put(&v, "}", 1);
	if (c.oom || k.oom || v.oom) {
		rv = ax_err_set(AX_ENOMEM, "component_stats: out of memory");
	} else {
		const char *p[] = { c.buf, k.buf, v.buf };
		rv              = ax_store_exec(s, SQL, 3, p);
	}
	free(c.buf);
	free(k.buf);
	free(v.buf);
	return rv;
}
