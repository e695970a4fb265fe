/*
 * api_commands.h - durable control in ax-api: every state-changing route
 * (submit, trigger, backfill, pause, unpause, kill, clear, mark) records
 * a control_command row (engine/store_commands.h) in the request's
 * transaction and answers with its id; `Idempotency-Key` replays; and
 * `GET /api/v1/commands/{id}`.
 *
 * A state-changing handler runs:
 *   if (ax_api_cmd_replay(q, r)) return;      first answer of the key
 *   ... validate (4xx answers are not recorded) ...
 *   ax_store_begin(q->st); ... the request's own writes ...
 *   ax_api_cmd_commit(q, r, kind, body, payload, status, answer);
 * ax_api_cmd_commit inserts the row, adds "command_id" to the answer,
 * stores the answer for repeats, NOTIFYs the payload (with command_id:
 * it only wakes axd, which reads the row) and commits; on any failure it
 * rolls back and answers the error.
 *
 * Idempotency-Key (1..255 printable ASCII characters): a repeat with the
 * same key from the same token and the same request (method, path,
 * query, body) gets the first answer again (status and body, the same
 * command id) with no second effect; the same key with another request is
 * 422 idempotency_key_reused. Two concurrent first requests with one key:
 * the unique index lets one commit, the other waits for it and replays
 * its answer.
 *
 * Thread: a connection thread, with the request's borrowed store.
 */
#ifndef AX_API_COMMANDS_H
#define AX_API_COMMANDS_H

#include "api_http.h"

/* The request header that makes a state-changing request idempotent. */
#define AX_API_IDEM_HEADER "Idempotency-Key"

/*
 * When the request carries an Idempotency-Key already recorded for its
 * token: sets the first answer (or 422 for another request, 400 for a bad
 * key) and returns 1. Returns 0 when the handler must go on (no key, or a
 * key not seen yet), or 1 after an error answer.
 */
int ax_api_cmd_replay(ax_api_req *q, ax_api_resp *r);

/*
 * In the transaction the caller opened on q->st: records the command
 * (kind, body: a JSON object, borrowed), sets answer["command_id"],
 * stores (status, answer) as the first answer, NOTIFYs payload (borrowed;
 * may be NULL: nothing for axd to do, then the row is recorded applied
 * with result applied_result, borrowed, may be NULL) with "command_id"
 * added, commits, and answers (status, answer). Takes the reference of
 * answer. On failure rolls back and answers the error (a key recorded
 * meanwhile by a concurrent request: its first answer).
 */
void ax_api_cmd_commit(ax_api_req *q, ax_api_resp *r, const char *kind,
                       json_t *body, json_t *payload, json_t *applied_result,
                       unsigned status, json_t *answer);

/* GET /api/v1/commands/{id} */
/*
 * Checks the params of a trigger or backfill of DAG dag against the
 * declarations of its definition (the JSON text of a dag_versions row;
 * NULL: the DAG's active version is read). Returns 1 when they pass;
 * else answers and returns 0: 422 invalid_params {"error", "detail",
 * "param": the bad key, "declared": [names]} naming the key and what was
 * expected, or 404 / 500 when the definition cannot be read.
 */
int ax_api_cmd_check_params(ax_api_req *q, ax_api_resp *r, const char *dag,
                            const char *definition, const json_t *params);

void ax_api_command_show(ax_api_req *q, ax_api_resp *r);

#endif /* AX_API_COMMANDS_H */
