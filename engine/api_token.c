/*
 * api_token.c - bearer tokens of the HTTP API (see api_token.h).
 *
 * Tokens are compared by their SHA-256 in SQL (a unique index on hash), so
 * no secret is held in memory longer than one request, and the lookup
 * time does not depend on how much of a guess matched. Expiry and the
 * last-use throttle compare with the database's clock (now()), the one
 * clock every ax-api replica shares.
 */
#include "api_token.h"

#include <errno.h>
#include <inttypes.h>
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
ax_api_token_name_check(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0)
		return ax_err_set(AX_EINVAL,
		                  "a token needs a name (e.g. the "
		                  "person or system using it)");
	if (n > AX_API_TOKEN_NAME_MAX)
		return ax_err_set(AX_EINVAL,
		                  "token name is %zu bytes; at most %d", n,
		                  AX_API_TOKEN_NAME_MAX);
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || strchr("._-@:", c) != NULL)
			continue;
		return ax_err_set(AX_EINVAL,
		                  "token name: byte %zu (0x%02x) is not "
		                  "allowed; use letters, digits and . _ - @ :",
		                  i + 1, (unsigned char) c);
	}
	return AX_OK;
}

#define TTL_MAX_S (3650 * 86400) /* ten years */

ax_err
ax_api_token_parse_ttl(const char *text, int64_t *secs)
{
	static const struct {
		char    unit;
		int64_t mult;
	} units[]       = { { '\0', 1 },   { 's', 1 },     { 'm', 60 },
		            { 'h', 3600 }, { 'd', 86400 }, { 'w', 7 * 86400 } };
	const char *end = text;

	while (end != NULL && *end >= '0' && *end <= '9')
		end++;
	if (text != NULL && end != text && end - text <= 10 &&
	    (end[0] == '\0' || end[1] == '\0'))
		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
			if (units[i].unit == *end) {
				int64_t v =
				    strtoll(text, NULL, 10) * units[i].mult;
				if (v < 1 || v > TTL_MAX_S)
					break;
				*secs = v;
				return AX_OK;
			}
	return ax_err_set(AX_EINVAL,
	                  "ttl '%s': give seconds or a number with a unit "
	                  "s, m, h, d or w (e.g. 90d), from 1 s to 10 years",
	                  text ? text : "(null)");
}

/* Fills out with "axt_" + 64 hex digits of fresh randomness. */
static ax_err
token_random(char out[AX_API_TOKEN_LEN])
{
	unsigned char rnd[32];
	size_t        got = 0;

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
	memset(rnd, 0, sizeof(rnd));
	return AX_OK;
}

/* RFC 3339 UTC text of a timestamptz expression, for event payloads. */
#define UTC_TEXT(x)                                                           \
	"to_char((" x ") AT TIME ZONE 'UTC', "                                \
	"'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"

/* The payload members naming who acted: $1 id, $2 name, $3 role, $4 via
 * (shared by the event statements of create and revoke). */
#define ACTOR_JSON                                                            \
	"'token_id', nullif($1::bigint, 0), 'token_name', "                   \
	"nullif($2::text, ''), 'token_role', $3::text, 'via', $4::text"

/* The CTE "e" writing event type about the token row(s) t (needs the
 * ACTOR_JSON parameters). */
#define TOKEN_EVENT(type)                                                     \
	"e AS (INSERT INTO event_log (event_id, type, payload) "              \
	"SELECT gen_random_uuid(), '" type                                    \
	"', jsonb_build_object(" ACTOR_JSON                                   \
	", 'target', jsonb_build_object('id', t.id, 'name', "                 \
	"t.name, 'role', t.role, 'expires_at', " UTC_TEXT(                    \
	    "t.expires_at") ")) FROM t) "

/* The columns of a token as ax_api_token_list shows them. */
#define TOKEN_COLS                                                            \
	"id, name, role, created_at, last_used_at, expires_at, revoked_at, "  \
	"CASE WHEN revoked_at IS NOT NULL THEN 'revoked' WHEN expires_at "    \
	"<= now() THEN 'expired' ELSE 'live' END AS state"

/* Fills the actor parameters p[0..3] (ids: a buffer for the id). */
static void
actor_params(const ax_api_caller *by, char ids[24], const char **p)
{
	snprintf(ids, 24, "%" PRId64, by ? by->token_id : 0);
	p[0] = ids;
	p[1] = by ? by->name : "";
	p[2] = by && by->role != AX_API_ROLE_NONE ? ax_api_role_name(by->role)
	                                          : NULL;
	p[3] = by ? "api" : "database";
}

/* The error for a name a live token holds already. */
static ax_err
name_taken(ax_store *s, const char *name)
{
	const char *p[] = { name };
	int64_t     id  = 0;

	(void) ax_store_query_int64(
	    s,
	    "SELECT id FROM api_tokens WHERE name = $1 "
	    "AND revoked_at IS NULL",
	    1, p, &id);
	return ax_err_set(AX_EEXIST,
	                  "a live token is named '%s' already (id %" PRId64
	                  "); pick another name or revoke that one first "
	                  "(axctl token revoke %" PRId64 ")",
	                  name, id, id);
}

ax_err
ax_api_token_mint(ax_store *s, const ax_api_token_new *n,
                  char out[AX_API_TOKEN_LEN], int64_t *id)
{
	static const char sql[] =
	    "WITH t AS (INSERT INTO api_tokens (name, role, hash, expires_at) "
	    "SELECT $5, $6, $7, CASE WHEN $9::bigint > 0 THEN now() + "
	    "make_interval(secs => $9::bigint) WHEN $8::bigint = 0 THEN NULL "
	    "ELSE ax_ts($8::bigint) END "
	    "WHERE $9::bigint > 0 OR $8::bigint = 0 OR "
	    "ax_ts($8::bigint) > now() "
	    "RETURNING id, name, role, expires_at), " TOKEN_EVENT(
	        "token.created") "SELECT id FROM t";
	char        hash[AX_SHA256_HEX_LEN], exp[24], ids[24], ttl[24];
	const char *name = n->name ? n->name : "";
	const char *p[9];
	ax_err      rv;
	int64_t     rid;

	if (n->role < AX_API_ROLE_VIEWER || n->role > AX_API_ROLE_ADMIN)
		return ax_err_set(AX_EINVAL,
		                  "token role must be viewer, "
		                  "operator or admin");
	if (*name != '\0' && (rv = ax_api_token_name_check(name)) != AX_OK)
		return rv;
	if (n->expires_us < 0)
		return ax_err_set(AX_EINVAL, "token expiry is before 1970");
	if (n->ttl_s < 0 || n->ttl_s > TTL_MAX_S)
		return ax_err_set(AX_EINVAL,
		                  "token ttl must be 1 s to 10 years (%d s)",
		                  TTL_MAX_S);
	if (n->ttl_s > 0 && n->expires_us != 0)
		return ax_err_set(AX_EINVAL,
		                  "give a token either an expiry time or a "
		                  "ttl, not both");
	if ((rv = token_random(out)) != AX_OK)
		return rv;
	ax_sha256_hex(out, strlen(out), hash);
	snprintf(exp, sizeof(exp), "%" PRId64, n->expires_us);
	actor_params(n->by, ids, p);
	p[4] = name;
	p[5] = ax_api_role_name(n->role);
	p[6] = hash;
	p[7] = exp;
	snprintf(ttl, sizeof(ttl), "%" PRId64, n->ttl_s);
	p[8] = ttl;
	rv   = ax_store_query_int64(s, sql, 9, p, &rid);
	if (rv != AX_OK)
		memset(out, 0, AX_API_TOKEN_LEN);
	if (rv == AX_ENOENT)
		return ax_err_set(AX_EINVAL,
		                  "token expiry is not in the future; give a "
		                  "later time or a positive ttl");
	if (rv == AX_EEXIST)
		return name_taken(s, name);
	if (rv != AX_OK)
		return rv;
	if (id != NULL)
		*id = rid;
	return AX_OK;
}

ax_err
ax_api_token_create(ax_store *s, ax_api_role role, const char *name,
                    char out[AX_API_TOKEN_LEN], int64_t *id)
{
	ax_api_token_new n = { .role = role, .name = name };

	return ax_api_token_mint(s, &n, out, id);
}

/* Sets last_used_at to now when it is older than AX_API_TOKEN_TOUCH_S;
 * the condition is in SQL, so concurrent requests write it once. */
static void
touch(ax_store *s, int64_t id)
{
	char        ids[24], secs[16];
	const char *p[] = { ids, secs };

	snprintf(ids, sizeof(ids), "%" PRId64, id);
	snprintf(secs, sizeof(secs), "%d", AX_API_TOKEN_TOUCH_S);
	(void) ax_store_exec(
	    s,
	    "UPDATE api_tokens SET last_used_at = now() "
	    "WHERE id = $1::bigint AND (last_used_at IS NULL OR "
	    "last_used_at < now() - make_interval(secs => "
	    "$2::int))",
	    2, p);
}

ax_err
ax_api_token_check(ax_store *s, const char *token, ax_api_caller *who)
{
	static const char sql[] =
	    "SELECT id, role, name, expires_at <= now(), "
	    "last_used_at IS NULL OR last_used_at < now() - "
	    "make_interval(secs => $2::int), " UTC_TEXT(
	        "expires_at") " FROM api_tokens WHERE hash = $1 AND "
	                      "revoked_at IS NULL";
	char      hash[AX_SHA256_HEX_LEN], secs[16];
	PGresult *res;
	ax_err    rv;

	memset(who, 0, sizeof(*who));
	if (!token_shape_ok(token))
		return ax_err_set(AX_ENOENT, "malformed token");
	ax_sha256_hex(token, strlen(token), hash);
	snprintf(secs, sizeof(secs), "%d", AX_API_TOKEN_TOUCH_S);
	const char *params[] = { hash, secs };
	rv                   = ax_store_query(s, sql, 2, params, &res);
	if (rv != AX_OK)
		return rv;
	if (PQntuples(res) != 1) {
		PQclear(res);
		return ax_err_set(AX_ENOENT, "unknown or revoked token");
	}
	who->token_id = ax_store_cell_i64(res, 0, 0);
	snprintf(who->name, sizeof(who->name), "%s", PQgetvalue(res, 0, 2));
	rv          = ax_api_role_parse(PQgetvalue(res, 0, 1), &who->role);
	int expired = PQgetvalue(res, 0, 3)[0] == 't';
	int stale   = PQgetvalue(res, 0, 4)[0] == 't';
	if (rv == AX_OK && expired)
		rv = ax_err_set(AX_EPERM,
		                "token %" PRId64 " ('%s') expired at %s; "
		                "create a new one",
		                who->token_id, who->name,
		                PQgetvalue(res, 0, 5));
	PQclear(res);
	if (rv != AX_OK) {
		memset(who, 0, sizeof(*who));
		return rv;
	}
	if (stale)
		touch(s, who->token_id);
	return AX_OK;
}

ax_err
ax_api_token_list(ax_store *s, PGresult **res)
{
	return ax_store_query(
	    s, "SELECT " TOKEN_COLS " FROM api_tokens ORDER BY id", 0, NULL,
	    res);
}

ax_err
ax_api_token_get(ax_store *s, int64_t id, PGresult **res)
{
	char        ids[24];
	const char *p[] = { ids };

	snprintf(ids, sizeof(ids), "%" PRId64, id);
	return ax_store_query(
	    s, "SELECT " TOKEN_COLS " FROM api_tokens WHERE id = $1::bigint",
	    1, p, res);
}

ax_err
ax_api_token_revoke(ax_store *s, int64_t id, const ax_api_caller *by,
                    PGresult **res)
{
	static const char sql[] =
	    "WITH t AS (UPDATE api_tokens SET revoked_at = now() "
	    "WHERE id = $5::bigint AND revoked_at IS NULL "
	    "RETURNING id, name, role, expires_at), " TOKEN_EVENT(
	        "token.revoked") "SELECT count(*) FROM t";
	char        tid[24], ids[24];
	const char *p[5];
	PGresult   *row = NULL;
	int64_t     n   = 0;
	ax_err      rv;

	if (res != NULL)
		*res = NULL;
	snprintf(tid, sizeof(tid), "%" PRId64, id);
	actor_params(by, ids, p);
	p[4] = tid;
	if ((rv = ax_store_query_int64(s, sql, 5, p, &n)) != AX_OK ||
	    (rv = ax_api_token_get(s, id, &row)) != AX_OK)
		return rv;
	if (PQntuples(row) == 0) {
		PQclear(row);
		return ax_err_set(AX_ENOENT, "no token %" PRId64, id);
	}
	if (n == 0) {
		rv = ax_err_set(AX_ESTATE,
		                "token %" PRId64 " was revoked at %s", id,
		                PQgetvalue(row, 0, 6));
		PQclear(row);
		return rv;
	}
	if (res != NULL)
		*res = row;
	else
		PQclear(row);
	return AX_OK;
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
	/* a deleted file leaves its token live: the next one is numbered */
	rv =
	    ax_api_token_create(s, AX_API_ROLE_ADMIN, "standalone", tok, NULL);
	for (int k = 2; rv == AX_EEXIST && k < 1000; k++) {
		char name[32];
		snprintf(name, sizeof(name), "standalone-%d", k);
		rv =
		    ax_api_token_create(s, AX_API_ROLE_ADMIN, name, tok, NULL);
	}
	if (rv != AX_OK)
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
