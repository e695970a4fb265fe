/*
 * api_rules.h - the Allow/Block rule routes of ax-api (engine/rule.h has
 * the format and the precedence, docs/rules.md the operator's view):
 *   GET    /api/v1/rules            list (viewer), with "in_force" now
 *   POST   /api/v1/rules            create (operator): 201 with the row
 *   DELETE /api/v1/rules/{id}       delete (operator): 200 with the row
 *   GET    /api/v1/rules/{id}/test  the instances the rule holds now
 *   POST   /api/v1/rules/test       the same for a rule not stored yet
 * A create or delete is one statement: the row, an event_log row
 * (rule.created / rule.deleted, with the token's name) and a NOTIFY
 * ax_control {"op": "rules"} that makes axd's resource detector read the
 * table again, all committed together.
 * Thread: a connection thread, with the request's borrowed store.
 */
#ifndef AX_API_RULES_H
#define AX_API_RULES_H

#include "api_http.h"

void ax_api_rules_list(ax_api_req *q, ax_api_resp *r);
void ax_api_rules_create(ax_api_req *q, ax_api_resp *r);
void ax_api_rules_delete(ax_api_req *q, ax_api_resp *r);
void ax_api_rules_test(ax_api_req *q, ax_api_resp *r);
void ax_api_rules_test_new(ax_api_req *q, ax_api_resp *r);

#endif /* AX_API_RULES_H */
