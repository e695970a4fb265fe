/*
 * api_token.c - bearer tokens of the HTTP API (see api_token.h).
 *
 * Tokens are compared by their SHA-256 in SQL (a unique index on hash), so
 * no secret is held in memory longer than one request, and the lookup
 * time does not depend on how much of a guess matched.
 */
#include "api_token.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "sha256.h"

static const char *const role_names[] = { "none", "viewer", "operator",
	                                  "admin" };

const char *
ax_api_role_name(ax_api_role r)
{
	if ((int) r < 0 || r > AX_API_ROLE_ADMIN)
		return "none";
	return role_names[r];
}

ax_err
ax_api_role_parse(const char *name, ax_api_role *out)
{
	for (int r = AX_API_ROLE_VIEWER; r <= AX_API_ROLE_ADMIN; r++)
		if (name != NULL && strcmp(name, role_names[r]) == 0) {
			*out = (ax_api_role) r;
			return AX_OK;
		}
	return ax_err_set(AX_EINVAL,
	                  "role '%s' is not known; use viewer, operator or "
	                  "admin",
	                  name ? name : "(null)");
}

/* 1 when token has the shape axt_<64 lowercase hex>. */
static int
token_shape_ok(const char *t)
{
	if (t == NULL || strncmp(t, "axt_", 4) != 0 ||
	    strlen(t) != AX_API_TOKEN_LEN - 1)
		return 0;
	for (const char *p = t + 4; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return 0;
	return 1;
}

ax_err
ax_api_token_create(ax_store *s, ax_api_role role, const char *name,
                    char out[AX_API_TOKEN_LEN], int64_t *id)
{
	unsigned char rnd[32];
	char          hash[AX_SHA256_HEX_LEN];
	ax_err        rv;
	int64_t       rid;
	size_t        got = 0;

	if (role < AX_API_ROLE_VIEWER || role > AX_API_ROLE_ADMIN)
		return ax_err_set(AX_EINVAL,
		                  "token role must be viewer, "
		                  "operator or admin");
	if (name == NULL)
		name = "";
	if (strlen(name) > 250)
		return ax_err_set(AX_EINVAL,
		                  "token name is %zu bytes; at most 250",
		                  strlen(name));
	while (got < sizeof(rnd)) {
		ssize_t n = getrandom(rnd + got, sizeof(rnd) - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return ax_err_set(AX_EIO, "getrandom: %s",
			                  strerror(errno));
		got += (size_t) n;
	}
	memcpy(out, "axt_", 4);
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(out + 4 + 2 * i, 3, "%02x", rnd[i]);
	ax_sha256_hex(out, strlen(out), hash);

	const char *params[] = { name, ax_api_role_name(role), hash };
	rv                   = ax_store_query_int64(s,
	                                            "INSERT INTO api_tokens (name, role, hash) "
	                                                              "VALUES ($1, $2, $3) RETURNING id",
	                                            3, params, &rid);
	if (rv != AX_OK) {
		memset(out, 0, AX_API_TOKEN_LEN);
		return rv;
	}
	if (id != NULL)
		*id = rid;
	return AX_OK;
}

ax_err
ax_api_token_check(ax_store *s, const char *token, ax_api_role *role,
                   int64_t *id)
{
	char      hash[AX_SHA256_HEX_LEN];
	PGresult *res;
	ax_err    rv;

	if (!token_shape_ok(token))
		return ax_err_set(AX_ENOENT, "malformed token");
	ax_sha256_hex(token, strlen(token), hash);
	const char *params[] = { hash };
	rv                   = ax_store_query(s,
	                                      "SELECT id, role FROM api_tokens "
	                                                        "WHERE hash = $1 AND revoked_at IS NULL",
	                                      1, params, &res);
	if (rv != AX_OK)
		return rv;
	if (PQntuples(res) != 1) {
		PQclear(res);
		return ax_err_set(AX_ENOENT, "unknown or revoked token");
	}
	rv = ax_api_role_parse(PQgetvalue(res, 0, 1), role);
	if (rv == AX_OK && id != NULL)
		*id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return rv;
}

ax_err
ax_api_token_write_admin(ax_store *s, const char *home, char *path, size_t len)
{
	char   tok[AX_API_TOKEN_LEN], tmp[4096];
	ax_err rv;
	int    fd;

	if (home == NULL || *home == '\0')
		return ax_err_set(AX_EINVAL, "empty AX home");
	if ((size_t) snprintf(path, len, "%s/admin.token", home) >= len ||
	    (size_t) snprintf(tmp, sizeof(tmp), "%s/.admin.token.tmp", home) >=
	        sizeof(tmp))
		return ax_err_set(AX_EINVAL, "AX home path is too long");
	if ((rv = ax_api_token_create(s, AX_API_ROLE_ADMIN, "standalone", tok,
	                              NULL)) != AX_OK)
		return rv;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return ax_err_set(AX_EIO, "%s: %s", tmp, strerror(errno));
	tok[AX_API_TOKEN_LEN - 1] = '\0';
	size_t n                  = strlen(tok);
	tok[n]                    = '\n';
	if (write(fd, tok, n + 1) != (ssize_t) (n + 1) || fsync(fd) != 0) {
		int e = errno;
		close(fd);
		unlink(tmp);
		return ax_err_set(AX_EIO, "%s: %s", tmp, strerror(e));
	}
	close(fd);
	memset(tok, 0, sizeof(tok));
	if (rename(tmp, path) != 0) {
		int e = errno;
		unlink(tmp);
		return ax_err_set(AX_EIO, "%s: %s", path, strerror(e));
	}
	return AX_OK;
}
