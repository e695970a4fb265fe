/*
 * store_calendars.c - the capacity_calendars table read into parsed
 * calendars (see store_calendars.h).
 */
#include "store_calendars.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"

ax_err
ax_store_calendars_load(ax_store *s, const char *comp, ax_store_calendar **out,
                        size_t *n)
{
	PGresult          *res = NULL;
	ax_store_calendar *v;
	ax_err             rv;
	int                rows;
	size_t             k = 0;

	*out = NULL;
	*n   = 0;
	if ((rv = ax_store_query(s,
	                         "SELECT name, spec::text FROM "
	                         "capacity_calendars ORDER BY name",
	                         0, NULL, &res)) != AX_OK)
		return rv;
	rows = PQntuples(res);
	if ((v = calloc((size_t) rows + 1, sizeof(*v))) == NULL) {
		PQclear(res);
		return ax_err_set(AX_ENOMEM,
		                  "capacity calendars: out of memory");
	}
	for (int i = 0; i < rows; i++) {
		const char *name = PQgetvalue(res, i, 0);
		if (ax_calendar_parse_text(PQgetvalue(res, i, 1), &v[k].cal) !=
		    AX_OK) {
			ax_logf(AX_LOG_WARN, comp, "BAD_CALENDAR", NULL,
			        "capacity calendar of %s skipped: %s", name,
			        ax_err_detail());
			ax_calendar_fini(&v[k].cal);
			continue;
		}
		if ((v[k].name = strdup(name)) == NULL) {
			PQclear(res);
			ax_store_calendars_free(v, k + 1);
			return ax_err_set(AX_ENOMEM,
			                  "capacity calendars: out of memory");
		}
		k++;
	}
	PQclear(res);
	*out = v;
	*n   = k;
	return AX_OK;
}

void
ax_store_calendars_free(ax_store_calendar *v, size_t n)
{
	for (size_t i = 0; v != NULL && i < n; i++) {
		ax_calendar_fini(&v[i].cal);
		free(v[i].name);
	}
	free(v);
}
