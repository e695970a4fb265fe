/*
 * store_events.c - the event_log table and its dead letters (see
 * store_events.h): the idempotent batched insert of events (one
 * statement for small batches; for large ones a lookup of the ids
 * already stored, then COPY) and the event_dead_letter row of an event
 * PostgreSQL refuses.
 */
#include "store_events.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "log.h"
#include "store_internal.h"
#include "uuid.h"

/* ---------------------------------------------------------------------- */
/* event_log */

/* Small batches: one statement, one round trip. */
#define SQL_INSERT_EV                                                         \
	"INSERT INTO event_log (event_id, type, time, dag_id, dag_run_id, "   \
	"instance_id, run_id, attempt, trace_id, reason, payload) "           \
	"SELECT eid::uuid, ty, ax_ts(tm), (SELECT id FROM dags WHERE name = " \
	"u.dg), nullif(dr, 0), nullif(ii, 0), rid::uuid, nullif(att, 0), "    \
	"tr, rs, pl::jsonb "                                                  \
	"FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], "      \
	"$5::bigint[], $6::bigint[], $7::text[], $8::int[], $9::text[], "     \
	"$10::text[], $11::text[]) AS u(eid, ty, tm, dg, dr, ii, rid, att, "  \
	"tr, rs, pl) "                                                        \
	"ON CONFLICT (event_id, time) DO NOTHING"

/* From this many rows a batch goes through COPY: its three round trips
 * (lookup, COPY, data) cost more than they save below about 100 rows
 * (tests/bench/bench_store_events: 100 rows 21 against 20 us a row,
 * 1000 rows 13 against 19). */
#define EV_COPY_MIN 128

/*
 * Larger batches are written with COPY: measured on this machine, 10,000 rows
 * took 85-130 ms through COPY against 220-300 ms through INSERT ...
 * SELECT FROM unnest(...) ON CONFLICT (array parsing, a dag lookup per
 * row, speculative insertion). COPY has no ON CONFLICT, so the ids that
 * already exist are looked up first (with the DAG ids, one statement),
 * and a batch never carries an id twice. event_log is unique per
 * (event_id, time) (partitioned by month, 0015): the look-up names the
 * batch's first and last event time, so it reads the one or two months
 * that can hold a re-sent row, not every month kept. An id committed by
 * another writer after the lookup fails the COPY on the unique key; the batch
 * then runs again (see ax_store_insert_events) and leaves it out.
 */
#define SQL_EV_KNOWN                                                          \
	"SELECT 'd', name, id FROM dags WHERE name = ANY($1::text[]) "        \
	"UNION ALL SELECT 'e', event_id::text, 0 FROM event_log "             \
	"WHERE event_id = ANY($2::uuid[]) AND time >= ax_ts($3::bigint) "     \
	"AND time <= ax_ts($4::bigint)"
#define SQL_COPY_EV                                                           \
	"COPY event_log (event_id, type, time, dag_id, dag_run_id, "          \
	"instance_id, run_id, attempt, trace_id, reason, payload) FROM STDIN"

static const char *
nonempty(const char *s)
{
	return s != NULL && s[0] != '\0' ? s : NULL;
}

/* Appends ,"key":"value" (no comma first) with value JSON-escaped; buf
 * has room (6 bytes per byte of value). No-op when value is NULL. */
static size_t
put_str_key(char *buf, size_t len, const char *key, const char *value)
{
	if (value == NULL)
		return len;
	len += (size_t) sprintf(buf + len, "%s\"%s\":\"", len > 1 ? "," : "",
	                        key);
	len = ax_json_escape(buf, len, len + strlen(value) * 6 + 8, value);
	buf[len++] = '"';
	buf[len]   = '\0';
	return len;
}

/* Appends ,"key":v (no comma first). */
static size_t
put_int_key(char *buf, size_t len, const char *key, int64_t v)
{
	return len +
	    (size_t) sprintf(buf + len, "%s\"%s\":%lld", len > 1 ? "," : "",
	                     key, (long long) v);
}

/*
 * payload_object without a JSON library, for the usual case of a payload
 * that is already one valid JSON object (or none): the fixed keys, then
 * the payload's members spliced in after them. jsonb keeps the last of
 * duplicate keys, so the payload's keys still win. NULL when the payload
 * needs the general path (not an object, not valid) or out of memory.
 */
static char *
payload_spliced(const ax_store_event_row *e)
{
	const char *pl = nonempty(e->payload_json), *body = NULL;
	const char *dag = nonempty(e->dag), *task = nonempty(e->task);
	const char *src = nonempty(e->source);
	size_t      len = 1, need = 256;
	char       *out;

	if (pl != NULL) {
		if (!ax_json_object_valid(pl))
			return NULL;
		body = pl + strspn(pl, " \t\n\r") + 1; /* after the '{' */
		body += strspn(body, " \t\n\r");
		need += strlen(body);
	}
	need += (dag ? strlen(dag) : 0) * 6 + (task ? strlen(task) : 0) * 6 +
	    (src ? strlen(src) : 0) * 6;
	if ((out = malloc(need)) == NULL)
		return NULL;
	out[0] = '{';
	out[1] = '\0';
	len    = put_str_key(out, len, "dag", dag);
	len    = put_str_key(out, len, "task", task);
	len    = put_str_key(out, len, "source", src);
	if (e->logical_time_us != 0)
		len = put_int_key(out, len, "logical_time_us",
		                  e->logical_time_us);
	if (e->shard_total > 1) {
		len = put_int_key(out, len, "shard_index", e->shard_index);
		len = put_int_key(out, len, "shard_total", e->shard_total);
	}
	if (body != NULL && body[0] != '}') {
		if (len > 1)
			out[len++] = ',';
		memcpy(out + len, body, strlen(body) + 1); /* ends with '}' */
	} else {
		out[len++] = '}';
		out[len]   = '\0';
	}
	return out;
}

/*
 * The stored payload of e as JSON object text (malloc'd; NULL when out of
 * memory): dag, task, source, logical_time_us and, for sharded tasks,
 * shard_index / shard_total, then the keys of e's own payload (a JSON
 * object; anything else is kept as {"raw": text}), which win on a
 * clash. Built here rather than in SQL: at thousands of events a second
 * the JSON work in PostgreSQL was a third of the insert's cost.
 */
static char *
payload_object(const ax_store_event_row *e)
{
	json_error_t je;
	json_t      *o, *j = NULL;
	char        *out = payload_spliced(e);

	if (out != NULL)
		return out;
	if ((o = json_object()) == NULL)
		return NULL;
	if (nonempty(e->dag))
		json_object_set_new(o, "dag", json_string(e->dag));
	if (nonempty(e->task))
		json_object_set_new(o, "task", json_string(e->task));
	if (nonempty(e->source))
		json_object_set_new(o, "source", json_string(e->source));
	if (e->logical_time_us != 0)
		json_object_set_new(o, "logical_time_us",
		                    json_integer(e->logical_time_us));
	if (e->shard_total > 1) {
		json_object_set_new(o, "shard_index",
		                    json_integer(e->shard_index));
		json_object_set_new(o, "shard_total",
		                    json_integer(e->shard_total));
	}
	if (nonempty(e->payload_json)) {
		j = json_loads(e->payload_json, JSON_DECODE_ANY, &je);
		if (j != NULL && json_is_object(j))
			json_object_update(o, j);
		else
			json_object_set_new(o, "raw",
			                    json_string(e->payload_json));
		json_decref(j);
	}
	out = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return out;
}

/* COPY text is built in an ax_buf (its error is sticky: checked once,
 * before the COPY). */
typedef ax_buf copybuf;

static void
cb_put(copybuf *c, const char *s, size_t n)
{
	ax_buf_append(c, s, n);
}

/* One field: text escaped for COPY (backslash, tab, newline, CR), NULL
 * as \N; sep is the byte after it (tab, or newline at the row's end). */
static void
cb_text(copybuf *c, const char *s, char sep)
{
	if (s == NULL)
		cb_put(c, "\\N", 2);
	else
		while (*s != '\0') {
			size_t n = strcspn(s, "\\\t\n\r");
			cb_put(c, s, n);
			s += n;
			if (*s == '\0')
				break;
			char e[2] = { '\\',
				      *s == '\\'       ? '\\'
				          : *s == '\t' ? 't'
				          : *s == '\n' ? 'n'
				                       : 'r' };
			cb_put(c, e, 2);
			s++;
		}
	cb_put(c, &sep, 1);
}

static void
cb_int(copybuf *c, int64_t v, int zero_is_null, char sep)
{
	char b[24];
	if (zero_is_null && v == 0) {
		cb_text(c, NULL, sep);
		return;
	}
	snprintf(b, sizeof(b), "%lld", (long long) v);
	cb_text(c, b, sep);
}

/* UTC microseconds as timestamptz text. */
static void
cb_time(copybuf *c, int64_t us, char sep)
{
	char      b[48];
	int64_t   sec = us / 1000000, frac = us % 1000000;
	struct tm tm;
	if (frac < 0) {
		frac += 1000000;
		sec--;
	}
	time_t t = (time_t) sec;
	gmtime_r(&t, &tm);
	snprintf(b, sizeof(b), "%04d-%02d-%02d %02d:%02d:%02d.%06lld+00",
	         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	         tm.tm_min, tm.tm_sec, (long long) frac);
	cb_text(c, b, sep);
}

static int
cmp_cstr(const void *a, const void *b)
{
	return strcmp(*(const char *const *) a, *(const char *const *) b);
}

/* Event ids compare without case: PostgreSQL prints uuids in lower case
 * and ax_uuid_valid accepts both. */
static int
cmp_id(const void *a, const void *b)
{
	return strcasecmp(*(const char *const *) a, *(const char *const *) b);
}

/* Row i of a batch, sorted by event id then position. */
typedef struct ev_pos {
	const char *id;
	size_t      i;
} ev_pos;

static int
cmp_ev_pos(const void *a, const void *b)
{
	const ev_pos *x = a, *y = b;
	int           c = strcasecmp(x->id, y->id);
	if (c != 0)
		return c;
	return x->i < y->i ? -1 : x->i > y->i;
}

typedef struct name_id {
	const char *name;
	int64_t     id;
} name_id;

static int
cmp_name_id(const void *a, const void *b)
{
	return strcmp(((const name_id *) a)->name,
	              ((const name_id *) b)->name);
}

static ax_err
events_copy(ax_store *s, const ax_store_event_row *rows, size_t n,
            size_t *inserted, size_t *skipped)
{
	ax_sqlarr    a[2];
	const char  *p[4];
	char         tlo[24], thi[24];
	int64_t      tmin = INT64_MAX, tmax = INT64_MIN;
	PGresult    *r   = NULL;
	size_t       bad = 0, good = 0, nd = 0, nk = 0;
	const char **ids = NULL, **dags = NULL, **known = NULL;
	name_id     *dmap   = NULL;
	ev_pos      *pos    = NULL;
	char        *skip   = NULL;
	copybuf      cb     = { 0 };
	int64_t      copied = 0;
	ax_err       rv;

	if ((rv = ax_store_prepare_once(s, "ax_sa.ev_known", SQL_EV_KNOWN,
	                                4)) != AX_OK)
		return rv;
	ids  = calloc(n, sizeof(*ids));
	dags = calloc(n, sizeof(*dags));
	pos  = calloc(n, sizeof(*pos));
	skip = calloc(n, 1);
	if (ids == NULL || dags == NULL || pos == NULL || skip == NULL) {
		rv = ax_err_set(AX_ENOMEM, "store: out of memory for events");
		goto out;
	}
	/* the rows to write: valid, and each id once */
	for (size_t i = 0; i < n; i++) {
		const ax_store_event_row *e = &rows[i];
		if (e->event_id == NULL || !ax_uuid_valid(e->event_id) ||
		    nonempty(e->type) == NULL) {
			bad++;
			skip[i] = 1;
			continue;
		}
		if (e->time_us < tmin)
			tmin = e->time_us;
		if (e->time_us > tmax)
			tmax = e->time_us;
		pos[good]   = (ev_pos) { e->event_id, i };
		ids[good++] = e->event_id;
		if (nonempty(e->dag) != NULL)
			dags[nd++] = e->dag;
	}
	if (skipped != NULL)
		*skipped = bad;
	if (good == 0)
		goto out;
	/* an id twice in the batch: the first row wins */
	qsort(pos, good, sizeof(*pos), cmp_ev_pos);
	for (size_t k = 1; k < good; k++)
		if (strcasecmp(pos[k].id, pos[k - 1].id) == 0)
			skip[pos[k].i] = 1;
	qsort(ids, good, sizeof(*ids), cmp_id);
	qsort(dags, nd, sizeof(*dags), cmp_cstr);
	memset(a, 0, sizeof(a));
	for (size_t i = 0; i < nd; i++)
		if (i == 0 || strcmp(dags[i], dags[i - 1]) != 0)
			ax_sqlarr_text(&a[0], dags[i]);
	for (size_t i = 0; i < good; i++)
		if (i == 0 || strcasecmp(ids[i], ids[i - 1]) != 0)
			ax_sqlarr_text(&a[1], ids[i]);
	rv = ax_sqlarr_end_all(a, p, 2);
	snprintf(tlo, sizeof(tlo), "%lld", (long long) tmin);
	snprintf(thi, sizeof(thi), "%lld", (long long) tmax);
	p[2] = tlo;
	p[3] = thi;
	if (rv == AX_OK)
		rv = ax_store_query_prepared(s, "ax_sa.ev_known", 4, p, &r);
	ax_sqlarr_fini_all(a, 2);
	if (rv != AX_OK)
		goto out;
	/* the ids already stored */
	known = calloc((size_t) PQntuples(r) + 1, sizeof(*known));
	dmap  = calloc((size_t) PQntuples(r) + 1, sizeof(*dmap));
	if (known == NULL || dmap == NULL) {
		rv = ax_err_set(AX_ENOMEM, "store: out of memory for events");
		goto out;
	}
	size_t ndm = 0;
	for (int k = 0; k < PQntuples(r); k++) {
		if (PQgetvalue(r, k, 0)[0] == 'd')
			dmap[ndm++] = (name_id) { PQgetvalue(r, k, 1),
				                  ax_store_cell_i64(r, k, 2) };
		else
			known[nk++] = PQgetvalue(r, k, 1);
	}
	qsort(dmap, ndm, sizeof(*dmap), cmp_name_id);
	qsort(known, nk, sizeof(*known), cmp_id);
	for (size_t i = 0; i < n; i++) {
		const ax_store_event_row *e = &rows[i];
		if (skip[i] ||
		    bsearch(&e->event_id, known, nk, sizeof(*known), cmp_id) !=
		        NULL)
			continue;
		const char *rid = e->run_id != NULL && ax_uuid_valid(e->run_id)
		    ? e->run_id
		    : NULL;
		name_id     key = { nonempty(e->dag), 0 }, *d = NULL;
		if (key.name != NULL)
			d = bsearch(&key, dmap, ndm, sizeof(*dmap),
			            cmp_name_id);
		char *pl = payload_object(e);
		if (pl == NULL) {
			rv = ax_err_set(AX_ENOMEM, "store: event payload");
			goto out;
		}
		cb_text(&cb, e->event_id, '\t');
		cb_text(&cb, e->type, '\t');
		cb_time(&cb, e->time_us, '\t');
		cb_int(&cb, d != NULL ? d->id : 0, 1, '\t');
		cb_int(&cb, e->dag_run_id, 1, '\t');
		cb_int(&cb, e->instance_id, 1, '\t');
		cb_text(&cb, rid, '\t');
		cb_int(&cb, e->attempt, 1, '\t');
		cb_text(&cb, nonempty(e->trace_id), '\t');
		cb_text(&cb, nonempty(e->reason), '\t');
		cb_text(&cb, pl, '\n');
		free(pl);
	}
	if (ax_buf_err(&cb) != AX_OK) {
		rv = ax_err_set(AX_ENOMEM, "store: out of memory for events");
		goto out;
	}
	if (cb.len > 0 &&
	    (rv = ax_store_copy_in(s, SQL_COPY_EV, cb.p, cb.len, &copied)) !=
	        AX_OK)
		goto out;
	if (inserted != NULL)
		*inserted = (size_t) copied;
out:
	PQclear(r);
	free(ids);
	free(dags);
	free(known);
	free(dmap);
	free(pos);
	free(skip);
	ax_buf_fini(&cb);
	return rv;
}

ax_err
ax_store_events_prepare(ax_store *s)
{
	return ax_store_prepare_generic(s, "ax_sa.insert_ev", SQL_INSERT_EV,
	                                11);
}

static ax_err
events_insert(ax_store *s, const ax_store_event_row *rows, size_t n,
              size_t *inserted, size_t *skipped)
{
	ax_sqlarr   a[11];
	const char *p[11];
	PGresult   *r   = NULL;
	size_t      bad = 0, good = 0;
	ax_err      rv;

	if ((rv = ax_store_events_prepare(s)) != AX_OK)
		return rv;
	memset(a, 0, sizeof(a));
	for (size_t i = 0; i < n; i++) {
		const ax_store_event_row *e = &rows[i];
		if (e->event_id == NULL || !ax_uuid_valid(e->event_id) ||
		    nonempty(e->type) == NULL) {
			bad++;
			continue;
		}
		const char *rid = e->run_id != NULL && ax_uuid_valid(e->run_id)
		    ? e->run_id
		    : NULL;
		char       *pl  = payload_object(e);
		if (pl == NULL) {
			ax_sqlarr_fini_all(a, 11);
			return ax_err_set(AX_ENOMEM, "store: event payload");
		}
		good++;
		ax_sqlarr_text(&a[0], e->event_id);
		ax_sqlarr_text(&a[1], e->type);
		ax_sqlarr_int(&a[2], e->time_us);
		ax_sqlarr_text(&a[3], nonempty(e->dag));
		ax_sqlarr_int(&a[4], e->dag_run_id);
		ax_sqlarr_int(&a[5], e->instance_id);
		ax_sqlarr_text(&a[6], rid);
		ax_sqlarr_int(&a[7], e->attempt);
		ax_sqlarr_text(&a[8], nonempty(e->trace_id));
		ax_sqlarr_text(&a[9], nonempty(e->reason));
		ax_sqlarr_text(&a[10], pl);
		free(pl);
	}
	if (skipped != NULL)
		*skipped = bad;
	if (good == 0) {
		ax_sqlarr_fini_all(a, 11);
		return AX_OK;
	}
	rv = ax_sqlarr_end_all(a, p, 11);
	if (rv == AX_OK && inserted == NULL)
		rv = ax_store_write_deferred(s, "ax_sa.insert_ev", 11, p);
	else if (rv == AX_OK)
		rv = ax_store_write(s, "ax_sa.insert_ev", NULL, 11, p, &r);
	ax_sqlarr_fini_all(a, 11);
	if (rv != AX_OK || inserted == NULL)
		return rv;
	if (inserted != NULL)
		*inserted = (size_t) strtoul(PQcmdTuples(r), NULL, 10);
	PQclear(r);
	return AX_OK;
}

ax_err
ax_store_insert_events(ax_store *s, const ax_store_event_row *rows, size_t n,
                       size_t *inserted, size_t *skipped)
{
	if (inserted != NULL)
		*inserted = 0;
	if (skipped != NULL)
		*skipped = 0;
	if (n > AX_STORE_BATCH_MAX)
		return ax_store_batch_check(n, "events");
	if (n == 0)
		return AX_OK;
	if (n < EV_COPY_MIN)
		return events_insert(s, rows, n, inserted, skipped);
	/* An id the lookup did not see (its writer had not committed yet)
	 * makes the COPY fail on the unique key, where the INSERT's ON
	 * CONFLICT would wait and skip it. Run again: the lookup now sees
	 * it. In a transaction that failure aborted everything before it, so
	 * the whole transaction runs again (AX_ERETRY); alone, this call. */
	for (int tries = 1;; tries++) {
		ax_err rv = events_copy(s, rows, n, inserted, skipped);
		if (rv != AX_EEXIST)
			return rv;
		if (ax_store_in_tx(s) || tries == 3)
			return ax_err_set(
			    AX_ERETRY,
			    "store: an event id of this batch was "
			    "stored while it was written; run it "
			    "again (it will be left out)");
	}
}

/* ---------------------------------------------------------------------- */
/* event_dead_letter */

#define SQL_DEAD_LETTER                                                       \
	"INSERT INTO event_dead_letter (event_id, envelope, error) "          \
	"VALUES ($1::uuid, $2::bytea, $3)"

ax_err
ax_store_dead_letter_event(ax_store *s, const ax_store_dead_letter *d)
{
	static const char hex[] = "0123456789abcdef";
	const char       *why   = d->error != NULL ? d->error : "";
	size_t            wlen  = strlen(why);
	char             *env   = malloc(2 * d->len + 3);
	char             *err   = malloc(wlen + 1);
	const char       *p[3];
	ax_err            rv;

	if (env == NULL || err == NULL) {
		free(env);
		free(err);
		return ax_err_set(AX_ENOMEM, "store: dead letter");
	}
	env[0] = '\\';
	env[1] = 'x';
	for (size_t i = 0; i < d->len; i++) {
		env[2 + 2 * i]     = hex[d->envelope[i] >> 4];
		env[2 + 2 * i + 1] = hex[d->envelope[i] & 15];
	}
	env[2 + 2 * d->len] = '\0';
	for (size_t i = 0; i <= wlen; i++)
		err[i] = i == wlen ? '\0'
		    : (unsigned char) why[i] < 0x20 ||
		        (unsigned char) why[i] > 0x7e
		    ? '?'
		    : why[i];
	p[0] = d->event_id != NULL && ax_uuid_valid(d->event_id) ? d->event_id
	                                                         : NULL;
	p[1] = env;
	p[2] = err;
	rv = ax_store_prepare_once(s, "ax_sa.dead_letter", SQL_DEAD_LETTER, 3);
	if (rv == AX_OK)
		rv = ax_store_write(s, "ax_sa.dead_letter", NULL, 3, p, NULL);
	free(env);
	free(err);
	return rv;
}
