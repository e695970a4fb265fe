/*
 * store_commands.h - the control_command table (migration 0007): durable
 * control requests from outside into axd.
 *
 * Role: ax-api records every state-changing request as one row in the
 * request's transaction (ax_store_commands_insert) and answers with its
 * id; axd's control thread reads what is pending (in id order) and
 * forwards it to the actor owning it; that actor sets the outcome in the
 * transaction of the effect (ax_store_commands_finish), only while the
 * row is still pending, so a command forwarded twice (a restart, a
 * reconnect, a retry) is applied once. `GET /api/v1/commands/{id}` and
 * `axctl command show` read one row (ax_store_commands_get).
 *
 * Invariants:
 *  - status moves pending -> applied | rejected once, never back; a
 *    finish of a row that is no longer pending changes nothing and says
 *    so (claimed 0), and the caller must then undo its effect (roll back).
 *  - A finish written by a fenced store records the store's fence as
 *    applied_epoch: the axd lease epoch that applied it.
 *  - a command keeps the name and role of the token that asked, as they
 *    were then; settling it writes a command.applied / command.rejected
 *    event carrying them (the audit trail: who paused this DAG, when).
 *  - (token, idempotency key) is unique: a second insert with the same
 *    pair fails with AX_EEXIST after the first committed.
 *
 * Workload: one row per API request (tens a second at most); axd reads
 * the pending rows through a partial index that holds only those.
 */
#ifndef AX_STORE_COMMANDS_H
#define AX_STORE_COMMANDS_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "store.h"

/* Outcome of a command as stored in control_command.status. */
typedef enum ax_cmd_status {
	AX_CMD_PENDING = 0,
	AX_CMD_APPLIED,
	AX_CMD_REJECTED,
} ax_cmd_status;

/* "pending", "applied", "rejected". */
const char *ax_cmd_status_name(ax_cmd_status st);

/* 1 when kind is one of the kinds the table accepts (submit, trigger,
 * backfill, pause, unpause, kill, clear, mark). */
int ax_cmd_kind_valid(const char *kind);

/* A command to record. Strings are borrowed for the call. */
typedef struct ax_store_cmd_new {
	const char *kind;       /* ax_cmd_kind_valid */
	const char *body_json;  /* a JSON object: what axd needs to apply it;
	                           NULL: {} */
	int64_t     token_id;   /* api_tokens.id; 0: unknown */
	const char *token_name; /* that token's name then; NULL/"": none */
	const char *token_role; /* and its role ("operator"); may be NULL */
	const char *actor;      /* the program that asked; may be NULL */
	const char *idem_key;   /* Idempotency-Key; NULL: none */
	const char *request_sha256; /* hex hash of the request; may be NULL */
} ax_store_cmd_new;

/*
 * Inserts the command (status pending) in the caller's transaction, or
 * on its own, and sets *id. AX_EEXIST when (token, idem_key) is taken;
 * AX_EINVAL for an unknown kind or a body that is not a JSON object.
 */
ax_err ax_store_commands_insert(ax_store *s, const ax_store_cmd_new *c,
                                int64_t *id);

/* Stores the first answer (HTTP status and JSON body) of command id. */
ax_err ax_store_commands_set_response(ax_store *s, int64_t id, int status,
                                      const char *response_json);

/* Columns of ax_store_commands_find_key(). */
enum {
	AX_CMD_K_ID = 0,      /* control_command.id */
	AX_CMD_K_SHA,         /* request_sha256 (may be NULL) */
	AX_CMD_K_RESP_STATUS, /* response_status (may be NULL) */
	AX_CMD_K_RESPONSE,    /* response as JSON text (may be NULL) */
};

/*
 * The command recorded with (token_id, key), columns AX_CMD_K_*: zero
 * rows when there is none. The caller PQclear()s *res.
 */
ax_err ax_store_commands_find_key(ax_store *s, int64_t token_id,
                                  const char *key, PGresult **res);

/*
 * One command as the API shows it: id, kind, status, body, result,
 * reason, actor, token_id, token_name, token_role, idempotency_key,
 * created_at, applied_at, applied_epoch (named
 * columns; timestamps as timestamptz). Zero rows for an unknown id. The
 * caller PQclear()s *res.
 */
ax_err ax_store_commands_get(ax_store *s, int64_t id, PGresult **res);

/* Columns of ax_store_commands_pending(). */
enum {
	AX_CMD_P_ID = 0, /* control_command.id */
	AX_CMD_P_KIND,   /* kind */
	AX_CMD_P_BODY,   /* body as JSON text */
};

/*
 * The pending commands with id > after_id, in id order, at most limit
 * (columns AX_CMD_P_*). The caller PQclear()s *res.
 */
ax_err ax_store_commands_pending(ax_store *s, int64_t after_id, int limit,
                                 PGresult **res);

/* One outcome to write. Strings are borrowed for the call. */
typedef struct ax_store_cmd_done {
	int64_t       id;
	ax_cmd_status status;      /* AX_CMD_APPLIED or AX_CMD_REJECTED */
	const char   *result_json; /* JSON value; NULL: SQL NULL */
	const char   *reason;      /* required when rejected */
	int           claimed;     /* out: 1 when this call moved the row */
} ax_store_cmd_done;

/*
 * Sets the outcome of n commands in one statement, each only while it is
 * pending (UPDATE ... WHERE status = 'pending'); applied_at = now(),
 * applied_epoch = the store's fence (NULL when unfenced), and writes one
 * event_log row per moved command in the same statement: type
 * command.applied / command.rejected, reason the kind in capitals, the
 * DAG, run and instance the body or result names (the instance's DAG and
 * run looked up in hot rows and history), payload {command_id,
 * kind, token_id, token_name, token_role, requested_at, body, result,
 * reason}: who asked for what, and what came of it. Fills claimed;
 * *nclaimed (may be NULL) counts the moved rows. A write: fenced
 * (ax_store_write) when no transaction is open, else part of the
 * caller's. AX_EINVAL for a pending status, a rejection without reason,
 * or n over AX_STORE_BATCH_MAX.
 */
ax_err ax_store_commands_finish(ax_store *s, ax_store_cmd_done *rows, size_t n,
                                size_t *nclaimed);

#endif /* AX_STORE_COMMANDS_H */
