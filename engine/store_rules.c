/*
 * store_rules.c - the rules table read into parsed rules (see
 * store_rules.h).
 */
#include "store_rules.h"

#include <stdlib.h>

#include "log.h"

ax_err
ax_store_rules_load(ax_store *s, size_t extra, ax_rule **out, size_t *n,
                    size_t *skipped)
{
	PGresult *res = NULL;
	ax_rule  *v;
	ax_err    rv;
	int       rows;
	size_t    k = 0, bad = 0;

	*out = NULL;
	*n   = 0;
	if (skipped != NULL)
		*skipped = 0;
	if ((rv = ax_store_query(
	         s, "SELECT id, spec::text FROM rules ORDER BY id", 0, NULL,
	         &res)) != AX_OK)
		return rv;
	rows = PQntuples(res);
	if ((v = calloc((size_t) rows + extra + 1, sizeof(*v))) == NULL) {
		PQclear(res);
		return ax_err_set(AX_ENOMEM, "rules: out of memory");
	}
	for (int i = 0; i < rows; i++) {
		if (ax_rule_parse_text(PQgetvalue(res, i, 1), &v[k]) !=
		    AX_OK) {
			ax_logf(AX_LOG_WARN, "rules", "BAD_RULE", NULL,
			        "rule %s skipped: %s", PQgetvalue(res, i, 0),
			        ax_err_detail());
			ax_rule_fini(&v[k]);
			bad++;
			continue;
		}
		v[k++].id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
	}
	PQclear(res);
	*out = v;
	*n   = k;
	if (skipped != NULL)
		*skipped = bad;
	return AX_OK;
}

void
ax_rules_free(ax_rule *v, size_t n)
{
	for (size_t i = 0; v != NULL && i < n; i++)
		ax_rule_fini(&v[i]);
	free(v);
}
