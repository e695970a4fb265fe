/*
 * api_tokens.h - the token routes of ax-api (admin only): create
 * (POST /api/v1/tokens: the token is in that answer and nowhere else),
 * list (GET: names, roles, times and state, never the token or its hash)
 * and revoke (DELETE /api/v1/tokens/{id}: refused from the next request
 * on). engine/api_token.h owns the table and writes the audit events.
 * Thread: a connection thread, with the request's borrowed store.
 */
#ifndef AX_API_TOKENS_H
#define AX_API_TOKENS_H

#include "api_http.h"

void ax_api_tokens_create(ax_api_req *q, ax_api_resp *r);
void ax_api_tokens_list(ax_api_req *q, ax_api_resp *r);
void ax_api_tokens_revoke(ax_api_req *q, ax_api_resp *r);

#endif /* AX_API_TOKENS_H */
