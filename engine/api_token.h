/*
 * api_token.h - bearer tokens of the HTTP API: roles, creation, checks.
 *
 * Role: `POST /api/v1/tokens` (api-server/api_tokens.c), `axctl token
 * create` on the database and `axctl standalone` mint tokens here; ax-api
 * checks the Authorization header of every request against them, lists
 * and revokes them. A token is "axt_" followed by 64 hex digits (256
 * random bits from getrandom); only its SHA-256 hex is stored (api_tokens,
 * migrations 0002 and 0009), so the token itself is shown once and cannot
 * be read back.
 *
 * Invariants:
 *  - roles are ordered viewer < operator < admin; a route names the least
 *    role it needs. A revoked, expired or unknown token has no role.
 *  - nothing caches a check: every request reads api_tokens, so a revoke
 *    or an expiry takes effect at the next request.
 *  - a non-empty name names at most one live (not revoked) token.
 *  - creating and revoking a token writes a token.created / token.revoked
 *    event_log row in the same statement, naming who did it.
 * Workload: one indexed lookup per API request, plus one UPDATE of
 * last_used_at per token and minute (AX_API_TOKEN_TOUCH_S); creation and
 * revocation are rare.
 */
#ifndef AX_API_TOKEN_H
#define AX_API_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "store.h"

typedef enum ax_api_role {
	AX_API_ROLE_NONE = 0, /* no token needed (healthz) / no valid token */
	AX_API_ROLE_VIEWER,   /* read everything */
	AX_API_ROLE_OPERATOR, /* + pause, trigger, backfill, kill, clear, mark
	                       */
	AX_API_ROLE_ADMIN,    /* + submit DAGs (they run code on workers) */
} ax_api_role;

/* "axt_" + 64 hex digits + NUL. */
#define AX_API_TOKEN_LEN 69

/* Longest token name, in bytes. */
#define AX_API_TOKEN_NAME_MAX 250

/* last_used_at is written when older than this: its precision, and at
 * most one write per token in that time however busy the token is. */
#define AX_API_TOKEN_TOUCH_S 60

/* Who made a request: the token it carried, as it was then. */
typedef struct ax_api_caller {
	int64_t     token_id; /* api_tokens.id; 0: no token */
	ax_api_role role;
	char        name[AX_API_TOKEN_NAME_MAX + 1]; /* "" when none */
} ax_api_caller;

/* "viewer", "operator", "admin" ("none" for AX_API_ROLE_NONE). */
const char *ax_api_role_name(ax_api_role r);

/*
 * Parses "viewer" | "operator" | "admin" into *out; AX_EINVAL with a
 * detail listing the roles otherwise.
 */
ax_err ax_api_role_parse(const char *name, ax_api_role *out);

/*
 * AX_OK when name is a valid token name: 1 to 250 bytes of letters,
 * digits and . _ - @ : (it shows in tables and in the audit trail, so no
 * spaces or control characters); AX_EINVAL saying what to change.
 */
ax_err ax_api_token_name_check(const char *name);

/*
 * Parses a token lifetime, "<n>" seconds or "<n>s|m|h|d|w" (e.g. "90d"),
 * into *secs: 1 s to ten years. AX_EINVAL saying the form otherwise.
 */
ax_err ax_api_token_parse_ttl(const char *text, int64_t *secs);

/* A token to create. Strings are borrowed for the call. */
typedef struct ax_api_token_new {
	ax_api_role role;   /* not NONE */
	const char *name;   /* ax_api_token_name_check; NULL or
	                       "" only for unnamed tokens */
	int64_t expires_us; /* UTC microseconds; 0: never */
	int64_t ttl_s; /* > 0: expires this many seconds after the database's
	                  now (instead of expires_us) */
	const ax_api_caller *by; /* who asks (audit); NULL: made on the
	                            database directly (axctl, standalone) */
} ax_api_token_new;

/*
 * Creates token n, stores its hash, records a token.created event and
 * writes the token into out; *id (may be NULL) gets the row id. The
 * caller shows out once; it cannot be recovered later. Errors: AX_EINVAL
 * (bad role or name, an expiry not in the future, both expires_us and
 * ttl_s, a ttl over ten years), AX_EEXIST (a live
 * token has that name; the detail names its id), AX_EIO (no randomness),
 * the store's errors (AX_EDB when migration 0009 is missing).
 */
ax_err ax_api_token_mint(ax_store *s, const ax_api_token_new *n,
                         char out[AX_API_TOKEN_LEN], int64_t *id);

/* ax_api_token_mint of a token without expiry made on the database; a
 * NULL or empty name makes an unnamed token. */
ax_err ax_api_token_create(ax_store *s, ax_api_role role, const char *name,
                           char out[AX_API_TOKEN_LEN], int64_t *id);

/*
 * Looks token up (hash match, not revoked, not expired) and fills *who.
 * Updates last_used_at when it is older than AX_API_TOKEN_TOUCH_S (a
 * failed update is not an error: the check stands). AX_ENOENT for an
 * unknown, malformed or revoked token; AX_EPERM for an expired one (the
 * detail names it and when it expired); store errors otherwise. Thread:
 * the caller's store, no transaction open.
 */
ax_err ax_api_token_check(ax_store *s, const char *token, ax_api_caller *who);

/*
 * The tokens, oldest first: id, name, role, created_at, last_used_at,
 * expires_at, revoked_at (timestamptz) and state ("live", "expired",
 * "revoked"); never the hash. The caller PQclear()s *res.
 */
ax_err ax_api_token_list(ax_store *s, PGresult **res);

/* Token id as ax_api_token_list shows it: zero rows when there is none.
 * The caller PQclear()s *res. */
ax_err ax_api_token_get(ax_store *s, int64_t id, PGresult **res);

/*
 * Revokes token id now and records a token.revoked event naming by (NULL:
 * on the database directly); *res (may be NULL) gets the token's row as
 * ax_api_token_list shows it. AX_ENOENT for no such token, AX_ESTATE when
 * it is revoked already (the detail says when).
 */
ax_err ax_api_token_revoke(ax_store *s, int64_t id, const ax_api_caller *by,
                           PGresult **res);

/*
 * Creates an admin token named "standalone" (when a live one has that
 * name: "standalone-2", "-3", ...) and writes it, with a newline, to
 * HOME/admin.token (mode 0600, replacing the file). path receives the file's
 * path (len bytes). For `axctl standalone`. Errors: as ax_api_token_create,
 * AX_EIO naming the file.
 */
ax_err ax_api_token_write_admin(ax_store *s, const char *home, char *path,
                                size_t len);

#endif /* AX_API_TOKEN_H */
