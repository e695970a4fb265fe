/*
 * api_runs.c - run and instance routes of ax-api (see api_runs.h).
 *
 * Lists are keyset-paginated on id (newest first): `cursor` is the last
 * id of the previous page, so a page costs one index range scan (of the
 * hot table and of each history month, merged) however deep the client
 * pages.
 *
 * Instances and attempts are read from task_instances_all and
 * attempts_all, the hot rows and the history together: a run that ended
 * long ago keeps its pages. The mark's write goes to the hot table.
 */
#include "api_runs.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api_commands.h"
#include "api_server.h"
#include "clock.h"
#include "deadline.h"
#include "log.h"
#include "state.h"

#define LOG_MAX_BYTES   (8 * 1024 * 1024) /* one non-follow answer */
#define LOG_STATE_EVERY 500000            /* follow: attempt ended? (us) */

/* Path {id} as a positive integer (text kept in q); 0 after a 400. */
static int
path_id(ax_api_req *q, ax_api_resp *r, int64_t *id)
{
	char     *end;
	long long v;

	errno = 0;
	v     = strtoll(q->params[0], &end, 10);
	if (*q->params[0] == '\0' || *end != '\0' || errno != 0 || v <= 0) {
		ax_api_reply_error(r, 400, "invalid",
		                   "id must be a positive integer, got '%s'",
		                   q->params[0]);
		return 0;
	}
	*id = v;
	return 1;
}

/* Optional integer query argument as text for SQL (NULL when absent). */
static int
opt_id_arg(ax_api_req *q, ax_api_resp *r, const char *key, char *buf,
           size_t len, const char **out)
{
	int64_t v;

	*out = NULL;
	if (ax_api_query(q, key) == NULL)
		return 1;
	if (!ax_api_query_int(q, r, key, 0, 1, INT64_MAX, &v))
		return 0;
	snprintf(buf, len, "%" PRId64, v);
	*out = buf;
	return 1;
}

static void
reply_page(ax_api_resp *r, PGresult *res, const char *key, int64_t limit)
{
	int     n    = PQntuples(res);
	json_t *next = n == limit && n > 0
	    ? json_integer(strtoll(PQgetvalue(res, n - 1, 0), NULL, 10))
	    : json_null();
	ax_api_reply_json(r, 200,
	                  json_pack("{s:o,s:o}", key, ax_api_rows_json(res),
	                            "next_cursor", next));
}

/* ---- runs --------------------------------------------------------------- */

#define RUN_COLS                                                              \
	"r.id, d.name AS dag, r.run_type, r.logical_date, "                   \
	"r.interval_start, r.interval_end, r.state, r.conf, r.created_at, "   \
	"r.started_at, r.ended_at, r.dag_version_id, " AX_API_DEADLINE_COLS

/* The tables RUN_COLS reads: the run, its DAG and its version. */
#define RUN_FROM                                                              \
	"dag_runs r JOIN dags d ON d.id = r.dag_id "                          \
	"JOIN dag_versions v ON v.id = r.dag_version_id"

/* Removes member key of o into a new reference (NULL when absent). */
static json_t *
take(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	json_incref(v);
	json_object_del(o, key);
	return v;
}

int
ax_api_deadline_of(const json_t *def, const char *tzn, int64_t start_us,
                   int64_t end_us, ax_tz_cache *tzc, int64_t *at_us,
                   char *rule, size_t len)
{
	const ax_tz     *tz = ax_tz_utc();
	ax_deadline_spec spec;

	if (tzn == NULL)
		tzn = "UTC";
	if (strcmp(tzn, "UTC") != 0 && tzc != NULL &&
	    ax_tz_cache_get(tzc, tzn, &tz) != AX_OK)
		tz = ax_tz_utc();
	if (ax_deadline_from_json(def, &spec) != AX_OK ||
	    ax_deadline_instant(&spec, start_us, end_us, tz, at_us) != AX_OK)
		return 0;
	ax_deadline_text(&spec, tzn, rule, len);
	return 1;
}

void
ax_api_run_deadline(json_t *row, ax_tz_cache *tzc)
{
	json_t *def = take(row, "deadline_def");
	json_t *tzj = take(row, "deadline_tz");
	json_t *ms  = take(row, "deadline_misses");
	int64_t s   = json_integer_value(json_object_get(row, "iv_start_us"));
	int64_t e   = json_integer_value(json_object_get(row, "iv_end_us"));
	const char *tzn = json_is_string(tzj) ? json_string_value(tzj) : "UTC";
	json_t     *tasks = json_array(), *v;
	int64_t     at;
	int         missed = 0;
	size_t      i;
	char        b[AX_DEADLINE_TEXT_LEN], ts[40];

	json_object_del(row, "iv_start_us");
	json_object_del(row, "iv_end_us");
	json_array_foreach(ms, i, v)
	{
		if (!json_is_string(v))
			continue;
		if (json_string_value(v)[0] == '\0')
			missed = 1;
		else
			json_array_append(tasks, v);
	}
	if (ax_api_deadline_of(def, tzn, s, e, tzc, &at, b, sizeof(b))) {
		json_object_set_new(
		    row, "deadline",
		    json_string(ax_clock_fmt_utc(at, ts, sizeof(ts))));
		json_object_set_new(row, "deadline_rule", json_string(b));
	} else {
		json_object_set_new(row, "deadline", json_null());
		json_object_set_new(row, "deadline_rule", json_null());
	}
	json_object_set_new(row, "deadline_missed", json_boolean(missed));
	json_object_set_new(row, "task_deadlines_missed", tasks);
	json_decref(def);
	json_decref(tzj);
	json_decref(ms);
}

/* The runs of res as JSON, each with its deadline (ax_api_run_deadline). */
static json_t *
runs_json(const PGresult *res)
{
	json_t      *a   = ax_api_rows_json(res), *v;
	ax_tz_cache *tzc = NULL;
	size_t       i;

	(void) ax_tz_cache_new(&tzc);
	json_array_foreach(a, i, v) ax_api_run_deadline(v, tzc);
	ax_tz_cache_free(tzc);
	return a;
}

void
ax_api_runs_list(ax_api_req *q, ax_api_resp *r)
{
	static const char *const states[] = { "QUEUED", "RUNNING",  "SUCCESS",
		                              "FAILED", "CANCELED", NULL };
	const char              *state    = ax_api_query(q, "state"), *cursor;
	char                     cb[24], lb[24];
	int64_t                  limit;
	PGresult                *res;
	ax_err                   rv;

	if (state != NULL) {
		int ok = 0;
		for (const char *const *s = states; *s; s++)
			ok |= strcmp(*s, state) == 0;
		if (!ok) {
			ax_api_reply_error(r, 400, "invalid",
			                   "state '%s' is not a run state: "
			                   "QUEUED, RUNNING, SUCCESS, FAILED, "
			                   "CANCELED",
			                   state);
			return;
		}
	}
	if (!ax_api_query_int(q, r, "limit", 100, 1, 1000, &limit) ||
	    !opt_id_arg(q, r, "cursor", cb, sizeof(cb), &cursor))
		return;
	snprintf(lb, sizeof(lb), "%" PRId64, limit);
	const char *p[] = { ax_api_query(q, "dag"), state, cursor, lb };
	rv              = ax_store_query(q->st,
	                                 "SELECT " RUN_COLS " FROM " RUN_FROM " "
	                                              "WHERE ($1::text IS NULL OR d.name = $1) "
	                                              "AND ($2::text IS NULL OR r.state = $2) "
	                                              "AND ($3::bigint IS NULL OR r.id < $3) "
	                                              "ORDER BY r.id DESC LIMIT $4::int",
	                                 4, p, &res);
	if (rv != AX_OK) {
		ax_api_reply_err(r, rv);
		return;
	}
	{
		int     n    = PQntuples(res);
		json_t *next = n == limit && n > 0
		    ? json_integer(
		          strtoll(PQgetvalue(res, n - 1, 0), NULL, 10))
		    : json_null();
		ax_api_reply_json(r, 200,
		                  json_pack("{s:o,s:o}", "runs",
		                            runs_json(res), "next_cursor",
		                            next));
	}
	PQclear(res);
}

void
ax_api_run_show(ax_api_req *q, ax_api_resp *r)
{
	int64_t   id;
	PGresult *res;

	if (!path_id(q, r, &id))
		return;
	const char *p[] = { q->params[0] };
	res             = ax_api_query_row(
	                q, r,
	                "SELECT " RUN_COLS
	                ", (SELECT coalesce(jsonb_object_agg(state, n), "
	                            "'{}') FROM (SELECT state, count(*) AS n FROM "
	                            "task_instances_all WHERE dag_run_id = r.id GROUP BY state) "
	                            "x) AS instances_by_state "
	                            "FROM " RUN_FROM " "
	                            "WHERE r.id = $1::bigint",
	                1, p, "no run %" PRId64, id);
	if (res == NULL)
		return;
	json_t *runs = runs_json(res), *run = json_array_get(runs, 0);
	json_incref(run);
	json_decref(runs);
	ax_api_reply_json(r, 200, run);
	PQclear(res);
}

/* ---- instances ---------------------------------------------------------- */

#define TI_COLS                                                               \
	"i.id, d.name AS dag, i.dag_run_id, i.task, i.logical_time, "         \
	"i.shard, i.shard_total, i.state, i.reason, i.priority, i.channel, "  \
	"i.worker_group, i.pool, i.try_number, i.max_tries, i.created_at, "   \
	"i.updated_at, i.ready_at, i.started_at, i.ended_at"

void
ax_api_instances_list(ax_api_req *q, ax_api_resp *r)
{
	const char *state = ax_api_query(q, "state"), *cursor, *run;
	char        cb[24], rb[24], lb[24];
	int64_t     limit;
	ax_ti_state st;
	PGresult   *res;
	ax_err      rv;

	if (state != NULL && ax_state_parse(state, &st) != AX_OK) {
		ax_api_reply_error(r, 400, "invalid", "state: %s",
		                   ax_err_detail());
		return;
	}
	if (!ax_api_query_int(q, r, "limit", 100, 1, 1000, &limit) ||
	    !opt_id_arg(q, r, "cursor", cb, sizeof(cb), &cursor) ||
	    !opt_id_arg(q, r, "run", rb, sizeof(rb), &run))
		return;
	snprintf(lb, sizeof(lb), "%" PRId64, limit);
	const char *p[] = { ax_api_query(q, "dag"), state, cursor, lb, run,
		            ax_api_query(q, "task") };
	rv              = ax_store_query(q->st,
	                                 "SELECT " TI_COLS
	                                 " FROM task_instances_all i JOIN dags d "
	                                              "ON d.id = i.dag_id "
	                                              "WHERE ($1::text IS NULL OR d.name = $1) "
	                                              "AND ($2::text IS NULL OR i.state = $2) "
	                                              "AND ($3::bigint IS NULL OR i.id < $3) "
	                                              "AND ($5::bigint IS NULL OR i.dag_run_id = $5) "
	                                              "AND ($6::text IS NULL OR i.task = $6) "
	                                              "ORDER BY i.id DESC LIMIT $4::int",
	                                 6, p, &res);
	if (rv != AX_OK) {
		ax_api_reply_err(r, rv);
		return;
	}
	reply_page(r, res, "instances", limit);
	PQclear(res);
}

void
ax_api_instance_show(ax_api_req *q, ax_api_resp *r)
{
	int64_t   id;
	PGresult *res;

	if (!path_id(q, r, &id))
		return;
	const char *p[] = { q->params[0] };
	res             = ax_api_query_row(
	                q, r,
	                "SELECT " TI_COLS
	                ", (SELECT coalesce(jsonb_agg(jsonb_build_object("
	                            "'number', a.number, 'run_id', a.run_id, 'state', a.state, "
	                            "'worker_id', a.worker_id, 'due_at', a.due_at, "
	                            "'admitted_at', a.admitted_at, 'dispatched_at', "
	                            "a.dispatched_at, 'started_at', a.started_at, 'ended_at', "
	                            "a.ended_at, 'exit_status', a.exit_status, 'log_path', "
	                            "a.log_path, 'reason', a.reason, 'command', a.command) "
	                            "ORDER BY a.number), "
	                            "'[]') FROM attempts_all a WHERE a.instance_id = i.id) AS "
	                            "attempts FROM task_instances_all i JOIN dags d "
	                            "ON d.id = i.dag_id WHERE i.id = $1::bigint",
	                1, p, "no task instance %" PRId64, id);
	if (res == NULL)
		return;
	ax_api_reply_json(r, 200, ax_api_row_json(res, 0));
	PQclear(res);
}

/* Reads the instance's state (hot or history); 0 after a 404 / error
 * answer. */
static int
instance_state(ax_api_req *q, ax_api_resp *r, int64_t id, ax_ti_state *st)
{
	PGresult *res;
	ax_err    rv;

	const char *p[] = { q->params[0] };
	res             = ax_api_query_row(q, r,
	                                   "SELECT state FROM task_instances_all "
	                                               "WHERE id = $1::bigint",
	                                   1, p, "no task instance %" PRId64, id);
	if (res == NULL)
		return 0;
	rv = ax_state_parse(PQgetvalue(res, 0, 0), st);
	PQclear(res);
	if (rv != AX_OK) {
		ax_api_reply_err(r, rv);
		return 0;
	}
	return 1;
}

/* Records command kind (payload n: its op and members; the reference is
 * taken) and answers 202 with it as "requested". */
static void
command_reply(ax_api_req *q, ax_api_resp *r, const char *kind, json_t *n,
              int64_t id, ax_ti_state st)
{
	json_t *body = json_deep_copy(n), *req = json_deep_copy(n);

	if (body != NULL)
		json_object_del(body, "op");
	ax_api_cmd_commit(q, r, kind, body, n, NULL, 202,
	                  req ? json_pack("{s:I,s:s,s:o}", "instance_id",
	                                  (json_int_t) id, "state",
	                                  ax_state_name(st), "requested", req)
	                      : NULL);
	json_decref(body);
	json_decref(n);
}

void
ax_api_instance_kill(ax_api_req *q, ax_api_resp *r)
{
	int64_t     id;
	ax_ti_state st;
	ax_api_bad  bad;

	if (!ax_api_body_none(q->body, q->body_len, &bad)) {
		ax_api_reply_bad(r, &bad);
		return;
	}
	if (ax_api_cmd_replay(q, r) || !path_id(q, r, &id) ||
	    !instance_state(q, r, id, &st))
		return;
	if (ax_state_terminal(st)) {
		ax_api_reply_error(r, 409, "illegal_state",
		                   "instance %" PRId64
		                   " is %s: nothing to kill",
		                   id, ax_state_name(st));
		return;
	}
	command_reply(q, r, "kill",
	              json_pack("{s:s,s:I}", "op", "kill", "instance_id",
	                        (json_int_t) id),
	              id, st);
}

void
ax_api_instance_clear(ax_api_req *q, ax_api_resp *r)
{
	ax_api_clear_body b;
	ax_api_bad        bad;
	int64_t           id;
	ax_ti_state       st;

	if (!ax_api_body_clear(q->body, q->body_len, &b, &bad)) {
		ax_api_reply_bad(r, &bad);
		return;
	}
	if (ax_api_cmd_replay(q, r))
		goto out;
	if (!path_id(q, r, &id) || !instance_state(q, r, id, &st))
		goto out;
	if (!ax_state_terminal(st)) {
		ax_api_reply_error(r, 409, "illegal_state",
		                   "instance %" PRId64
		                   " is %s; only a finished "
		                   "instance can be cleared (kill it first)",
		                   id, ax_state_name(st));
		goto out;
	}
	command_reply(q, r, "clear",
	              json_pack("{s:s,s:I,s:b}", "op", "clear", "instance_id",
	                        (json_int_t) id, "downstream", b.downstream),
	              id, st);
out:
	json_decref(b.json);
}

void
ax_api_instance_mark(ax_api_req *q, ax_api_resp *r)
{
	ax_api_mark_body b;
	ax_api_bad       bad;
	json_t          *cb, *n;
	int64_t          id, got;
	ax_ti_state      from, to;
	ax_err           rv;
	char             payload[160];

	if (!ax_api_body_mark(q->body, q->body_len, &b, &bad)) {
		ax_api_reply_bad(r, &bad);
		return;
	}
	if (ax_api_cmd_replay(q, r))
		goto out;
	to = b.state;
	if (!path_id(q, r, &id) || !instance_state(q, r, id, &from))
		goto out;
	if ((rv = ax_state_check(from, to)) != AX_OK) {
		ax_api_reply_err(r, rv);
		goto out;
	}
	snprintf(payload, sizeof(payload),
	         "{\"from\":\"%s\",\"to\":\"%s\",\"token_id\":%" PRId64 "}",
	         ax_state_name(from), ax_state_name(to), q->token_id);
	const char *p[] = { q->params[0], ax_state_name(to),
		            ax_state_name(from), payload };
	/* a mark moves a RUNNING or UNKNOWN instance, and those are always
	 * in the hot table (only finished runs move to history) */
	if ((rv = ax_store_begin(q->st)) != AX_OK)
		goto fail;
	rv = ax_store_query_int64(
	    q->st,
	    "WITH m AS (UPDATE task_instances SET state = $2, reason = "
	    "'MANUAL_MARK', ended_at = now(), updated_at = now() "
	    "WHERE id = $1::bigint AND state = $3 "
	    "RETURNING id, dag_id, dag_run_id) "
	    "INSERT INTO event_log (event_id, type, dag_id, dag_run_id, "
	    "instance_id, reason, payload) SELECT gen_random_uuid(), "
	    "'instance.marked', dag_id, dag_run_id, id, 'MANUAL_MARK', "
	    "$4::jsonb FROM m RETURNING instance_id",
	    4, p, &got);
	if (rv == AX_ENOENT) {
		ax_store_rollback(q->st);
		ax_api_reply_error(r, 409, "conflict",
		                   "instance %" PRId64 " left state %s "
		                   "meanwhile; look again",
		                   id, ax_state_name(from));
		goto out;
	}
	if (rv != AX_OK)
		goto fail;
	/* the state is written; the command tells axd to re-read the run
	 * (downstreams released, the run completed) */
	cb =
	    json_pack("{s:I,s:s,s:s}", "instance_id", (json_int_t) id, "state",
	              ax_state_name(to), "from", ax_state_name(from));
	n = cb ? json_copy(cb) : NULL;
	if (n != NULL)
		json_object_set_new(n, "op", json_string("mark"));
	ax_api_cmd_commit(
	    q, r, "mark", cb, n, NULL, 200,
	    json_pack("{s:I,s:s,s:s,s:s}", "instance_id", (json_int_t) id,
	              "from", ax_state_name(from), "state", ax_state_name(to),
	              "reason", "MANUAL_MARK"));
	json_decref(cb);
	json_decref(n);
	goto out;
fail:
	ax_store_rollback(q->st);
	ax_api_reply_err(r, rv);
out:
	json_decref(b.json);
}

/* ---- logs --------------------------------------------------------------- */

typedef struct follow_ctx {
	ax_api_server         *srv;
	int                    fd;   /* the log file, -1 until it exists */
	int                    sock; /* the client's socket */
	struct MHD_Connection *conn;
	off_t                  off;     /* next byte to send */
	char                   id[24];  /* instance id */
	char                   num[12]; /* attempt number */
	char                  *path;
	int                    ended; /* the attempt ended: drain, then stop */
	int64_t next_check;           /* mono us of the next state check */
} follow_ctx;

static void
follow_free(void *cls)
{
	follow_ctx *f = cls;
	if (f->fd >= 0)
		close(f->fd);
	free(f->path);
	free(f);
}

/* 1 when the attempt has ended (or cannot be found any more). */
static int
attempt_ended(follow_ctx *f)
{
	ax_store *st;
	int64_t   v;
	ax_err    rv;

	if (ax_api_server_get_store(f->srv, 1000000, &st) != AX_OK)
		return 0;
	const char *p[] = { f->id, f->num };
	rv              = ax_store_query_int64(
	                 st,
	                 "SELECT (ended_at IS NOT NULL OR state IN ('SUCCESS', "
	                              "'FAILED', 'TIMEOUT', 'CANCELED'))::int FROM attempts_all "
	                              "WHERE instance_id = $1::bigint AND number = $2::int",
	                 2, p, &v);
	ax_api_server_put_store(f->srv, st);
	return rv == AX_ENOENT || (rv == AX_OK && v == 1);
}

/* 1 when the client closed its side (never waits). */
static int
client_gone(int sock)
{
	struct pollfd pfd = { .fd = sock, .events = POLLIN | POLLRDHUP };
	char          c;

	if (poll(&pfd, 1, 0) <= 0)
		return 0;
	if (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
		return 1;
	return recv(sock, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/*
 * MHD content reader of a follow, on the connection's event-loop
 * thread: never blocks. New bytes are sent; with none it suspends the
 * connection until the server's next tick (ax_api_server_wait) and
 * returns 0. The stream ends with the attempt, the client leaving or
 * the server stopping.
 */
static ssize_t
follow_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	follow_ctx *f = cls;

	for (;;) {
		if (f->fd < 0)
			f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
		if (f->fd >= 0) {
			ssize_t n = pread(f->fd, buf, max, f->off);
			if (n > 0) {
				f->off += n;
				return n;
			}
		}
		if (f->ended || ax_api_server_stopping(f->srv))
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (ax_clock_mono_us() >= f->next_check) {
			f->next_check = ax_clock_mono_us() + LOG_STATE_EVERY;
			if (attempt_ended(f)) {
				f->ended = 1;
				continue; /* one more read: the last bytes */
			}
		}
		if (client_gone(f->sock))
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (!ax_api_server_wait(f->srv, f->conn))
			return MHD_CONTENT_READER_END_OF_STREAM;
		return 0;
	}
}

/* Offset of the start of the last `lines` lines of fd (size bytes). */
static off_t
tail_offset(int fd, off_t size, int64_t lines)
{
	char    buf[8192];
	off_t   end  = size, pos;
	int64_t seen = 0;

	if (lines <= 0)
		return size;
	/* a final newline ends the last line; it does not start one */
	if (size > 0 && pread(fd, buf, 1, size - 1) == 1 && buf[0] == '\n')
		end = size - 1;
	pos = end;
	while (pos > 0) {
		size_t n =
		    pos > (off_t) sizeof(buf) ? sizeof(buf) : (size_t) pos;
		ssize_t got = pread(fd, buf, n, pos - (off_t) n);
		if (got != (ssize_t) n)
			return 0;
		for (size_t i = n; i > 0; i--)
			if (buf[i - 1] == '\n' && ++seen == lines)
				return pos - (off_t) n + (off_t) i;
		pos -= (off_t) n;
	}
	return 0;
}

/* Finds the attempt's number and log path; 0 after an answer. */
static int
find_log(ax_api_req *q, ax_api_resp *r, int64_t id, int64_t attempt,
         char num[12], char **path)
{
	PGresult *res;
	char      ab[24];
	ax_err    rv;

	snprintf(ab, sizeof(ab), "%" PRId64, attempt);
	const char *p[] = { q->params[0], attempt > 0 ? ab : NULL };
	rv              = ax_store_query(
	                 q->st,
	                 "SELECT a.number, a.log_path FROM task_instances_all i "
	                              "LEFT JOIN attempts_all a "
	                              "ON a.instance_id = i.id AND "
	                              "($2::int IS NULL OR a.number = $2::int) "
	                              "WHERE i.id = $1::bigint "
	                              "ORDER BY a.number DESC NULLS LAST LIMIT 1",
	                 2, p, &res);
	if (rv != AX_OK) {
		ax_api_reply_err(r, rv);
		return 0;
	}
	if (PQntuples(res) == 0)
		ax_api_reply_error(r, 404, "not_found",
		                   "no task instance %" PRId64, id);
	else if (PQgetisnull(res, 0, 0))
		ax_api_reply_error(
		    r, 404, "not_found",
		    attempt > 0 ? "instance %" PRId64 " has no attempt %s"
		                : "instance %" PRId64 " has no attempt yet%s",
		    id, attempt > 0 ? ab : "");
	else if (PQgetisnull(res, 0, 1))
		ax_api_reply_error(r, 404, "not_found",
		                   "attempt %s of instance %" PRId64
		                   " has no log yet",
		                   PQgetvalue(res, 0, 0), id);
	else {
		snprintf(num, 12, "%s", PQgetvalue(res, 0, 0));
		*path = strdup(PQgetvalue(res, 0, 1));
		PQclear(res);
		return *path != NULL;
	}
	PQclear(res);
	return 0;
}

static void
add_log_headers(struct MHD_Response *mr, const char *num, off_t size,
                off_t next)
{
	char b[32];
	MHD_add_response_header(mr, "Content-Type",
	                        "text/plain; charset=utf-8");
	MHD_add_response_header(mr, "X-AX-Attempt", num);
	snprintf(b, sizeof(b), "%lld", (long long) size);
	MHD_add_response_header(mr, "X-AX-Log-Size", b);
	if (next >= 0) {
		snprintf(b, sizeof(b), "%lld", (long long) next);
		MHD_add_response_header(mr, "X-AX-Next-Offset", b);
	}
}

void
ax_api_instance_logs(ax_api_req *q, ax_api_resp *r)
{
	int64_t     id, attempt, tail, offset, limit;
	int         follow, fd     = -1;
	char        num[12], *path = NULL;
	struct stat sb;
	off_t       start = 0, size = 0;

	if (!path_id(q, r, &id) ||
	    !ax_api_query_int(q, r, "attempt", 0, 1, INT32_MAX, &attempt) ||
	    !ax_api_query_int(q, r, "tail", -1, 0, 1000000, &tail) ||
	    !ax_api_query_int(q, r, "offset", -1, 0, INT64_MAX, &offset) ||
	    !ax_api_query_int(q, r, "limit", 1024 * 1024, 1, LOG_MAX_BYTES,
	                      &limit) ||
	    !ax_api_query_bool(q, r, "follow", 0, &follow))
		return;
	if (tail >= 0 && offset >= 0) {
		ax_api_reply_error(r, 400, "invalid",
		                   "give 'tail' or 'offset', not both");
		return;
	}
	if (!find_log(q, r, id, attempt, num, &path))
		return;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && !(follow && errno == ENOENT)) {
		ax_api_reply_error(
		    r, 404, "not_found",
		    "log of attempt %s is not readable here (%s)", num,
		    strerror(errno));
		goto out;
	}
	if (fd >= 0 && fstat(fd, &sb) == 0)
		size = sb.st_size;
	if (tail >= 0 && fd >= 0)
		start = tail_offset(fd, size, tail);
	else if (offset >= 0)
		start = offset;
	if (follow) {
		follow_ctx                     *f  = calloc(1, sizeof(*f));
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		    q->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (f == NULL || ci == NULL) {
			free(f);
			ax_api_reply_err(r, ax_err_set(AX_ENOMEM, "follow"));
			goto out;
		}
		f->srv  = q->srv;
		f->fd   = fd;
		fd      = -1;
		f->sock = ci->connect_fd;
		f->conn = q->conn;
		f->off  = start;
		f->path = path;
		path    = NULL;
		snprintf(f->id, sizeof(f->id), "%" PRId64, id);
		memcpy(f->num, num, sizeof(f->num));
		r->raw = MHD_create_response_from_callback(
		    MHD_SIZE_UNKNOWN, 64 * 1024, follow_read, f, follow_free);
		if (r->raw == NULL) {
			follow_free(f);
			ax_api_reply_err(r, ax_err_set(AX_ENOMEM, "follow"));
			goto out;
		}
		add_log_headers(r->raw, num, size, -1);
		/* a quiet log must not count as an idle connection */
		MHD_set_connection_option(q->conn,
		                          MHD_CONNECTION_OPTION_TIMEOUT, 0);
		r->status = 200;
		goto out;
	}
	if (start > size)
		start = size;
	size_t n = (size_t) ((size - start) < limit ? (size - start) : limit);
	char  *buf = malloc(n + 1);
	if (buf == NULL ||
	    (n > 0 && pread(fd, buf, n, start) != (ssize_t) n)) {
		free(buf);
		ax_api_reply_err(r, ax_err_set(AX_EIO, "reading %s", path));
		goto out;
	}
	r->raw =
	    MHD_create_response_from_buffer(n, buf, MHD_RESPMEM_MUST_FREE);
	if (r->raw == NULL) {
		free(buf);
		ax_api_reply_err(r, ax_err_set(AX_ENOMEM, "log"));
		goto out;
	}
	add_log_headers(r->raw, num, size, start + (off_t) n);
	r->status = 200;
out:
	if (fd >= 0)
		close(fd);
	free(path);
}

/* ---- lineage ------------------------------------------------------------ */

/* Breadth-first walk from task idx over edges (up: depends_on; down:
 * reverse); depth[i] > 0 for every task reached. */
static void
walk(json_t *tasks, size_t idx, int up, int *depth)
{
	size_t  n     = json_array_size(tasks);
	size_t *queue = malloc(n * sizeof(*queue)), head = 0, tail = 0;

	if (queue == NULL)
		return;
	queue[tail++] = idx;
	while (head < tail) {
		size_t      cur  = queue[head++];
		int         d    = cur == idx ? 0 : depth[cur];
		const char *name = json_string_value(
		    json_object_get(json_array_get(tasks, cur), "name"));
		for (size_t j = 0; j < n; j++) {
			json_t *tj = json_array_get(tasks, j);
			if (j == idx || depth[j] > 0)
				continue;
			json_t *from = up ? json_array_get(tasks, cur) : tj;
			const char *want = up
			    ? json_string_value(json_object_get(tj, "name"))
			    : name;
			json_t     *dep;
			size_t      k;
			json_array_foreach(json_object_get(from, "depends_on"),
			                   k, dep)
			{
				if (want && json_string_value(dep) &&
				    !strcmp(json_string_value(dep), want)) {
					depth[j]      = d + 1;
					queue[tail++] = j;
					break;
				}
			}
		}
	}
	free(queue);
}

static json_t *
side_json(json_t *tasks, const int *depth, PGresult *ti)
{
	json_t *a = json_array();
	for (size_t j = 0; j < json_array_size(tasks); j++) {
		if (depth[j] <= 0)
			continue;
		const char *name = json_string_value(
		    json_object_get(json_array_get(tasks, j), "name"));
		json_t *inst = json_array();
		for (int i = 0; i < PQntuples(ti); i++)
			if (name && !strcmp(PQgetvalue(ti, i, 1), name))
				json_array_append_new(inst,
				                      ax_api_row_json(ti, i));
		json_array_append_new(a,
		                      json_pack("{s:s,s:i,s:o}", "task",
		                                name ? name : "", "depth",
		                                depth[j], "instances", inst));
	}
	return a;
}

void
ax_api_instance_lineage(ax_api_req *q, ax_api_resp *r)
{
	int64_t   id;
	PGresult *res = NULL, *ti = NULL;
	json_t   *def = NULL, *tasks;
	int      *up = NULL, *down = NULL;
	ax_err    rv;
	size_t    idx = (size_t) -1, n;

	if (!path_id(q, r, &id))
		return;
	const char *p[] = { q->params[0] };
	rv              = ax_store_query(
	                 q->st,
	                 "SELECT i.dag_run_id, i.task, v.definition, d.name FROM "
	                              "task_instances_all i JOIN dag_runs r ON r.id = i.dag_run_id "
	                              "JOIN dag_versions v ON v.id = r.dag_version_id "
	                              "JOIN dags d ON d.id = i.dag_id WHERE i.id = $1::bigint",
	                 1, p, &res);
	if (rv != AX_OK) {
		ax_api_reply_err(r, rv);
		return;
	}
	if (PQntuples(res) == 0) {
		ax_api_reply_error(r, 404, "not_found",
		                   "no task instance %" PRId64, id);
		goto out;
	}
	def   = json_loads(PQgetvalue(res, 0, 2), 0, NULL);
	tasks = json_object_get(def, "tasks");
	n     = json_array_size(tasks);
	for (size_t j = 0; j < n; j++) {
		const char *tn = json_string_value(
		    json_object_get(json_array_get(tasks, j), "name"));
		if (tn != NULL && !strcmp(tn, PQgetvalue(res, 0, 1)))
			idx = j;
	}
	up   = calloc(n + 1, sizeof(int));
	down = calloc(n + 1, sizeof(int));
	if (up == NULL || down == NULL) {
		ax_api_reply_err(r, ax_err_set(AX_ENOMEM, "lineage"));
		goto out;
	}
	if (idx != (size_t) -1) {
		walk(tasks, idx, 1, up);
		walk(tasks, idx, 0, down);
	}
	const char *p2[] = { PQgetvalue(res, 0, 0) };
	rv =
	    ax_store_query(q->st,
	                   "SELECT id, task, shard, state, reason, try_number "
	                   "FROM task_instances_all "
	                   "WHERE dag_run_id = $1::bigint "
	                   "ORDER BY task, shard",
	                   1, p2, &ti);
	if (rv != AX_OK) {
		ax_api_reply_err(r, rv);
		goto out;
	}
	ax_api_reply_json(
	    r, 200,
	    json_pack(
	        "{s:I,s:s,s:I,s:s,s:o,s:o}", "instance_id", (json_int_t) id,
	        "dag", PQgetvalue(res, 0, 3), "dag_run_id",
	        (json_int_t) strtoll(PQgetvalue(res, 0, 0), NULL, 10), "task",
	        PQgetvalue(res, 0, 1), "upstream", side_json(tasks, up, ti),
	        "downstream", side_json(tasks, down, ti)));
out:
	free(up);
	free(down);
	json_decref(def);
	PQclear(ti);
	PQclear(res);
}
