/*
 * store_workers.c - batched upsert of the workers table (see
 * store_workers.h).
 */
#include "store_workers.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STMT "ax_workers_upsert"
#define SQL                                                                   \
	"INSERT INTO workers (id, worker_group, slots, used_slots, "          \
	"hostname, "                                                          \
	"pid, state, registered_at, last_heartbeat_at, lease_expires_at) "    \
	"SELECT i, g, s, u, h, p, st, ax_ts(r), ax_ts(hb), ax_ts(le) "        \
	"FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], "          \
	"$5::text[], $6::int[], $7::text[], $8::bigint[], $9::bigint[], "     \
	"$10::bigint[]) AS t(i, g, s, u, h, p, st, r, hb, le) "               \
	"ON CONFLICT (id) DO UPDATE SET worker_group = "                      \
	"EXCLUDED.worker_group, "                                             \
	"slots = EXCLUDED.slots, used_slots = EXCLUDED.used_slots, "          \
	"hostname = EXCLUDED.hostname, pid = EXCLUDED.pid, "                  \
	"state = EXCLUDED.state, registered_at = EXCLUDED.registered_at, "    \
	"last_heartbeat_at = EXCLUDED.last_heartbeat_at, "                    \
	"lease_expires_at = EXCLUDED.lease_expires_at"
#define NCOLS 10

/* A PostgreSQL array literal being built. */
typedef struct lit {
	char  *buf;
	size_t len, cap;
	size_t n; /* elements */
	int    oom;
} lit;

static void
put(lit *a, const char *s, size_t n)
{
	if (a->oom)
		return;
	if (a->len + n + 1 > a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 256;
		char  *b;
		while (cap < a->len + n + 1)
			cap *= 2;
		if ((b = realloc(a->buf, cap)) == NULL) {
			a->oom = 1;
			return;
		}
		a->buf = b;
		a->cap = cap;
	}
	memcpy(a->buf + a->len, s, n);
	a->len += n;
	a->buf[a->len] = '\0';
}

static void
sep(lit *a)
{
	put(a, a->n++ == 0 ? "{" : ",", 1);
}

static void
put_int(lit *a, int64_t v)
{
	char b[24];
	int  n = snprintf(b, sizeof(b), "%" PRId64, v);
	sep(a);
	put(a, b, (size_t) n);
}

static void
put_text(lit *a, const char *s)
{
	sep(a);
	if (s == NULL) {
		put(a, "NULL", 4);
		return;
	}
	put(a, "\"", 1);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			put(a, "\\", 1);
		put(a, s, 1);
	}
	put(a, "\"", 1);
}

static const char *
end(lit *a)
{
	put(a, a->n == 0 ? "{}" : "}", a->n == 0 ? 2 : 1);
	return a->oom ? NULL : a->buf;
}

static ax_err
check_row(const ax_store_worker_row *r, size_t i)
{
	static const char *const states[] = { "ACTIVE", "DRAINING", "LOST",
		                              "GONE" };
	int                      ok       = 0;
	if (r->id == NULL || *r->id == '\0')
		return ax_err_set(AX_EINVAL, "workers row %zu: empty id", i);
	if (r->worker_group == NULL || *r->worker_group == '\0')
		return ax_err_set(AX_EINVAL,
		                  "workers row %zu (%s): empty worker_group",
		                  i, r->id);
	if (r->slots < 0 || r->used_slots < 0)
		return ax_err_set(AX_EINVAL,
		                  "workers row %zu (%s): negative slots", i,
		                  r->id);
	for (size_t k = 0; k < 4; k++)
		if (r->state != NULL && strcmp(r->state, states[k]) == 0)
			ok = 1;
	if (!ok)
		return ax_err_set(
		    AX_EINVAL,
		    "workers row %zu (%s): state '%s'; use ACTIVE, "
		    "DRAINING, LOST or GONE",
		    i, r->id, r->state ? r->state : "(null)");
	return AX_OK;
}

ax_err
ax_store_workers_upsert(ax_store *s, const ax_store_worker_row *rows, size_t n)
{
	lit         a[NCOLS];
	const char *p[NCOLS];
	ax_err      rv;

	if (n == 0)
		return AX_OK;
	if (n > 10000)
		return ax_err_set(
		    AX_EINVAL, "workers upsert: %zu rows, at most 10000", n);
	for (size_t i = 0; i < n; i++)
		if ((rv = check_row(&rows[i], i)) != AX_OK)
			return rv;
	memset(a, 0, sizeof(a));
	for (size_t i = 0; i < n; i++) {
		const ax_store_worker_row *r = &rows[i];
		put_text(&a[0], r->id);
		put_text(&a[1], r->worker_group);
		put_int(&a[2], r->slots);
		put_int(&a[3], r->used_slots);
		put_text(&a[4], r->hostname);
		put_int(&a[5], r->pid);
		put_text(&a[6], r->state);
		put_int(&a[7], r->registered_at_us);
		put_int(&a[8], r->heartbeat_at_us);
		put_int(&a[9], r->lease_expires_at_us);
	}
	rv = AX_OK;
	for (size_t c = 0; c < NCOLS; c++)
		if ((p[c] = end(&a[c])) == NULL)
			rv = ax_err_set(AX_ENOMEM,
			                "workers upsert of %zu rows", n);
	if (rv == AX_OK) {
		rv = ax_store_prepare(s, STMT, SQL, NCOLS);
		if (rv == AX_EEXIST) { /* prepared by an earlier call */
			ax_err_clear();
			rv = AX_OK;
		}
		if (rv == AX_OK)
			rv = ax_store_query_prepared(s, STMT, NCOLS, p, NULL);
	}
	for (size_t c = 0; c < NCOLS; c++)
		free(a[c].buf);
	return rv;
}
