/*
 * store_rules.h - reading the rules table (migration 0012) into parsed
 * rules (engine/rule.h).
 *
 * Role: axd's resource detector reads the table at start and after every
 * {"op": "rules"} notification; ax-api's test routes read it to decide
 * with the whole set. ax-api writes the table itself (api_rules.c: the
 * row, its event and the NOTIFY in one statement).
 *
 * Invariants: one round trip per call; a row whose spec does not parse
 * (written around ax-api) is skipped and counted, never fatal.
 *
 * Workload: a handful of rows, read a few times a minute at most.
 */
#ifndef AX_STORE_RULES_H
#define AX_STORE_RULES_H

#include <stddef.h>

#include "ax_err.h"
#include "rule.h"
#include "store.h"

/*
 * Reads every rule, in id order, into *out (*n of them, with room for
 * `extra` more zeroed entries after them; free with ax_rules_free(*out,
 * *n + extra)). *skipped (may be NULL) gets the rows that did not parse
 * (each logged as a warning). Errors: those of ax_store_query, AX_ENOMEM;
 * *out is NULL then.
 */
ax_err ax_store_rules_load(ax_store *s, size_t extra, ax_rule **out, size_t *n,
                           size_t *skipped);

/* Finalises v[0..n) and frees v; NULL is fine. */
void ax_rules_free(ax_rule *v, size_t n);

#endif /* AX_STORE_RULES_H */
