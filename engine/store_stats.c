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
#include "store_internal.h"

#define SQL                                                                   \
	"INSERT INTO component_stats (component, key, value, updated_at) "    \
	"SELECT c, k, v, now() FROM unnest($1::text[], $2::text[], "          \
	"$3::bigint[]) AS t(c, k, v) "                                        \
	"ON CONFLICT (component, key) DO UPDATE SET value = "                 \
	"EXCLUDED.value, updated_at = EXCLUDED.updated_at"

ax_err
ax_store_stats_put(ax_store *s, const ax_store_stat *rows, size_t n)
{
	ax_sqlarr   a[3] = { 0 };
	const char *p[3];
	ax_err      rv;

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
	}
	for (size_t i = 0; i < n; i++) {
		ax_sqlarr_text(&a[0], rows[i].component);
		ax_sqlarr_text(&a[1], rows[i].key);
		ax_sqlarr_int(&a[2], rows[i].value);
	}
	if ((rv = ax_sqlarr_end_all(a, p, 3)) == AX_OK)
		rv = ax_store_write(s, NULL, SQL, 3, p, NULL);
	ax_sqlarr_fini_all(a, 3);
	return rv;
}
