/*
 * api_token.h - bearer tokens of the HTTP API: roles, creation, checks.
 *
 * Role: `axctl token create` and `axctl standalone` mint tokens here; ax-api
 * checks the Authorization header of every request against them. A token
 * is "axt_" followed by 64 hex digits (256 random bits from getrandom);
 * only its SHA-256 hex is stored (api_tokens, migration 0002), so the
 * token itself is shown once and cannot be read back.
 *
 * Invariants: roles are ordered viewer < operator < admin; a route names
 * the least role it needs. A revoked or unknown token has no role.
 * Workload: one indexed lookup per API request; creation is rare.
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

/* "viewer", "operator", "admin" ("none" for AX_API_ROLE_NONE). */
const char *ax_api_role_name(ax_api_role r);

/*
 * Parses "viewer" | "operator" | "admin" into *out; AX_EINVAL with a
 * detail listing the roles otherwise.
 */
ax_err ax_api_role_parse(const char *name, ax_api_role *out);

/*
 * Creates a token with role (not NONE) and name (NULL: ""), stores its
 * hash and writes the token into out. *id (may be NULL) gets the row id.
 * The caller shows out once; it cannot be recovered later. Errors:
 * AX_EINVAL (bad role, name over 250 bytes), AX_EIO (no randomness), the
 * store's errors (AX_EDB when migration 0002 is missing).
 */
ax_err ax_api_token_create(ax_store *s, ax_api_role role, const char *name,
                           char out[AX_API_TOKEN_LEN], int64_t *id);

/*
 * Looks token up (hash match, not revoked) and sets *role and *id (may be
 * NULL). AX_ENOENT for an unknown, malformed or revoked token; store
 * errors otherwise. Thread: the caller's store.
 */
ax_err ax_api_token_check(ax_store *s, const char *token, ax_api_role *role,
                          int64_t *id);

/*
 * Creates an admin token named "standalone" and writes it, with a
 * newline, to HOME/admin.token (mode 0600, replacing the file). path
 * receives the file's path (len bytes). For `axctl standalone`. Errors:
 * as ax_api_token_create, AX_EIO naming the file.
 */
ax_err ax_api_token_write_admin(ax_store *s, const char *home, char *path,
                                size_t len);

#endif /* AX_API_TOKEN_H */
