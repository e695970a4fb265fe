/*
 * control.c - the LISTEN thread of axd (see control.h): decodes NOTIFY
 * payloads and forwards them as commands through an ax_actor_client.
 */
#include "control.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "engine/control.h" /* the channel name (same base name) */
#include "store.h"
#include "uuid.h"

#define COMP "control"

#define BACKOFF_MIN_US (100 * AX_USEC_PER_MSEC)
#define BACKOFF_MAX_US (5 * AX_USEC_PER_SEC)

struct ax_control {
	const ax_pipeline_ctx *ctx;
	PGconn                *conn;   /* NULL while disconnected */
	ax_actor_client       *client; /* used by the thread only */
	pthread_t              thread;
	int                    started; /* thread running */
	int                    wake[2]; /* pipe: main -> thread (stop) */
	atomic_int             stop;
	atomic_uint_fast64_t   received, forwarded, malformed, undeliverable,
	    reconnects;
};

/* --- decoding -----------------------------------------------------------
 */

/* The required non-empty string member key of o, or NULL (detail set). */
static const char *
req_str(json_t *o, const char *op, const char *key)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_string(v) || json_string_length(v) == 0) {
		ax_err_set(AX_EPARSE,
		           "op '%s': \"%s\" must be a non-empty string", op,
		           key);
		return NULL;
	}
	return json_string_value(v);
}

/* The required positive integer member key of o, or 0 (detail set). */
static int64_t
req_id(json_t *o, const char *op, const char *key)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_integer(v) || json_integer_value(v) <= 0) {
		ax_err_set(AX_EPARSE,
		           "op '%s': \"%s\" must be a positive integer", op,
		           key);
		return 0;
	}
	return json_integer_value(v);
}

/* Fills the op-specific members of c; dest[] set. Strings borrowed from o
 * except *params (malloc'd, caller frees) and *ids (malloc'd). */
static ax_err
decode_op(json_t *o, const char *op, Ax__ControlOp *c, ax_control_msg *m,
          char **params, int64_t **ids)
{
	json_t *v;

	if (!strcmp(op, "dag_changed") || !strcmp(op, "paused") ||
	    !strcmp(op, "unpaused")) {
		m->dest[0] = AX_A_DAG_LOADER;
		return (c->dag = (char *) req_str(o, op, "dag")) ? AX_OK
		                                                 : AX_EPARSE;
	}
	if (!strcmp(op, "resync")) {
		m->dest[0] = AX_A_DAG_LOADER;
		return AX_OK;
	}
	if (!strcmp(op, "trigger")) {
		m->dest[0] = AX_A_TIME_DETECTOR;
		if ((c->dag = (char *) req_str(o, op, "dag")) == NULL)
			return AX_EPARSE;
		v = json_object_get(o, "logical_date_us");
		if (v != NULL && !json_is_null(v) &&
		    (!json_is_integer(v) || json_integer_value(v) < 0))
			return ax_err_set(AX_EPARSE,
			                  "op 'trigger': \"logical_date_us\" "
			                  "must be an integer >= 0 (UTC "
			                  "microseconds; 0: now)");
		c->logical_date_us =
		    json_is_integer(v) ? json_integer_value(v) : 0;
		v = json_object_get(o, "params");
		if (v != NULL && !json_is_null(v) && !json_is_object(v))
			return ax_err_set(AX_EPARSE,
			                  "op 'trigger': \"params\" "
			                  "must be an object");
		if (json_is_object(v)) {
			*params = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
			if (*params == NULL)
				return ax_err_set(AX_ENOMEM, "trigger params");
			c->params_json = *params;
		}
		return AX_OK;
	}
	if (!strcmp(op, "clear") || !strcmp(op, "mark")) {
		m->dest[0] = AX_A_DEPENDENCY_DETECTOR;
		if ((c->instance_id = req_id(o, op, "instance_id")) == 0)
			return AX_EPARSE;
		if (!strcmp(op, "clear")) {
			v = json_object_get(o, "downstream");
			if (v != NULL && !json_is_boolean(v))
				return ax_err_set(
				    AX_EPARSE,
				    "op 'clear': \"downstream\" must "
				    "be true or false");
			c->downstream = json_is_true(v);
			return AX_OK;
		}
		if ((c->state = (char *) req_str(o, op, "state")) == NULL)
			return AX_EPARSE;
		if (strcmp(c->state, "SUCCESS") && strcmp(c->state, "FAILED"))
			return ax_err_set(
			    AX_EPARSE,
			    "op 'mark': \"state\" must be "
			    "\"SUCCESS\" or \"FAILED\", not \"%s\"",
			    c->state);
		return AX_OK;
	}
	if (!strcmp(op, "backfill")) {
		size_t  i;
		json_t *e;

		m->dest[0] = AX_A_DEPENDENCY_DETECTOR;
		if ((c->dag = (char *) req_str(o, op, "dag")) == NULL)
			return AX_EPARSE;
		v = json_object_get(o, "mode");
		if (v == NULL)
			c->mode = "parallel";
		else if (json_is_string(v) &&
		         (!strcmp(json_string_value(v), "serial") ||
		          !strcmp(json_string_value(v), "parallel")))
			c->mode = (char *) json_string_value(v);
		else
			return ax_err_set(AX_EPARSE,
			                  "op 'backfill': \"mode\" must be "
			                  "\"serial\" or \"parallel\"");
		v = json_object_get(o, "run_ids");
		if (!json_is_array(v) || json_array_size(v) == 0)
			return ax_err_set(
			    AX_EPARSE,
			    "op 'backfill': \"run_ids\" must be a "
			    "non-empty array of dag_runs ids");
		if ((*ids = calloc(json_array_size(v), sizeof(**ids))) == NULL)
			return ax_err_set(AX_ENOMEM, "backfill run_ids");
		json_array_foreach(v, i, e)
		{
			if (!json_is_integer(e) || json_integer_value(e) <= 0)
				return ax_err_set(
				    AX_EPARSE,
				    "op 'backfill': \"run_ids\"[%zu] "
				    "must be a positive integer",
				    i);
			(*ids)[i] = json_integer_value(e);
		}
		c->n_run_ids = json_array_size(v);
		c->run_ids   = *ids;
		return AX_OK;
	}
	return ax_err_set(AX_EPARSE,
	                  "unknown op '%s' (expected dag_changed, paused, "
	                  "unpaused, trigger, kill, clear, mark, backfill or "
	                  "resync)",
	                  op);
}

/* The static name of op (m->op outlives the JSON document). */
static const char *
op_name(const char *op)
{
	static const char *const ops[] = {
		"dag_changed", "paused", "unpaused", "resync",  "trigger",
		"kill",        "clear",  "mark",     "backfill"
	};
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (!strcmp(ops[i], op))
			return ops[i];
	return "?";
}

static ax_err
pack(const Ax__Command *cmd, ax_control_msg *m)
{
	m->len = ax__command__get_packed_size(cmd);
	if ((m->cmd = malloc(m->len ? m->len : 1)) == NULL)
		return ax_err_set(AX_ENOMEM, "control command");
	ax__command__pack(cmd, m->cmd);
	return AX_OK;
}

ax_err
ax_control_decode(const char *json, ax_control_msg *out)
{
	Ax__Command        cmd = AX__COMMAND__INIT;
	Ax__ControlOp      c   = AX__CONTROL_OP__INIT;
	Ax__CancelInstance ci  = AX__CANCEL_INSTANCE__INIT;
	Ax__InstanceRef    ref = AX__INSTANCE_REF__INIT;
	char               trace[AX_UUID_LEN], hex[33];
	char              *params = NULL;
	int64_t           *ids    = NULL;
	json_error_t       jerr;
	json_t            *o;
	const char        *op;
	ax_err             rv;
	size_t             k = 0;

	memset(out, 0, sizeof(*out));
	if (json == NULL)
		return ax_err_set(AX_EPARSE, "empty payload");
	if ((o = json_loads(json, JSON_REJECT_DUPLICATES, &jerr)) == NULL)
		return ax_err_set(AX_EPARSE, "not JSON: %d:%d: %s", jerr.line,
		                  jerr.column, jerr.text);
	if (!json_is_object(o)) {
		json_decref(o);
		return ax_err_set(AX_EPARSE, "payload must be a JSON object");
	}
	if ((op = req_str(o, "?", "op")) == NULL) {
		json_decref(o);
		return ax_err_set(AX_EPARSE,
		                  "\"op\" must be a non-empty string");
	}
	ax_uuid_v4(trace);
	for (const char *p = trace; *p != '\0' && k < 32; p++)
		if (*p != '-')
			hex[k++] = *p;
	hex[k]           = '\0';
	cmd.trace_id     = hex;
	cmd.issued_at_us = ax_clock_utc_us();
	out->op          = op_name(op);
	if (!strcmp(op, "kill")) {
		/* the pre-hook remembers it and forwards it to the queue */
		out->dest[0]        = AX_A_PRE_HOOK;
		ref.instance_id     = req_id(o, op, "instance_id");
		rv                  = ref.instance_id ? AX_OK : AX_EPARSE;
		ci.instance         = &ref;
		ci.reason           = "MANUAL_KILL";
		cmd.body_case       = AX__COMMAND__BODY_CANCEL_INSTANCE;
		cmd.cancel_instance = &ci;
	} else {
		c.op          = (char *) out->op;
		rv            = decode_op(o, op, &c, out, &params, &ids);
		cmd.body_case = AX__COMMAND__BODY_CONTROL;
		cmd.control   = &c;
	}
	if (rv == AX_OK)
		rv = pack(&cmd, out);
	free(params);
	free(ids);
	json_decref(o);
	if (rv != AX_OK)
		ax_control_msg_fini(out);
	return rv;
}

void
ax_control_msg_fini(ax_control_msg *m)
{
	if (m == NULL)
		return;
	free(m->cmd);
	memset(m, 0, sizeof(*m));
}

/* --- connection ---------------------------------------------------------
 */

/* Connects and LISTENs; NULL (detail set) on failure. */
static PGconn *
listen_connect(const char *dsn)
{
	static const char *const keys[] = { "dbname", "connect_timeout",
		                            "application_name", NULL };
	const char *const        vals[] = { dsn, "5", "axd-control", NULL };
	char                     shown[512];
	PGconn                  *c = PQconnectdbParams(keys, vals, 1);
	PGresult                *r;

	if (c == NULL || PQstatus(c) != CONNECTION_OK) {
		ax_err_set(AX_EDBCONN, "cannot connect to %s: %s",
		           ax_store_dsn_redact(dsn, shown, sizeof(shown)),
		           c ? PQerrorMessage(c) : "out of memory");
		PQfinish(c);
		return NULL;
	}
	r = PQexec(c, "LISTEN " AX_CONTROL_CHANNEL);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		ax_err_set(AX_EDB, "LISTEN %s failed: %s", AX_CONTROL_CHANNEL,
		           PQerrorMessage(c));
		PQclear(r);
		PQfinish(c);
		return NULL;
	}
	PQclear(r);
	return c;
}

ax_err
ax_control_new(const ax_pipeline_ctx *ctx, ax_control **out)
{
	ax_control *c;

	*out = NULL;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return ax_err_set(AX_ENOMEM, "control");
	c->ctx     = ctx;
	c->wake[0] = c->wake[1] = -1;
	if (pipe2(c->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
		free(c);
		return ax_err_set(AX_EIO, "control: pipe: %s",
		                  strerror(errno));
	}
	if ((c->conn = listen_connect(ctx->dsn)) == NULL) {
		ax_err rv = AX_EDBCONN;
		close(c->wake[0]);
		close(c->wake[1]);
		free(c);
		return rv;
	}
	*out = c;
	return AX_OK;
}

void
ax_control_discard(ax_control *c)
{
	PGnotify *n;

	if (c == NULL || c->started || c->conn == NULL)
		return;
	if (!PQconsumeInput(c->conn)) {
		/* reconnect later, in the thread */
		PQfinish(c->conn);
		c->conn = listen_connect(c->ctx->dsn);
		return;
	}
	while ((n = PQnotifies(c->conn)) != NULL)
		PQfreemem(n);
}

/* --- the thread ---------------------------------------------------------
 */

static void
forward(ax_control *c, const char *payload)
{
	ax_control_msg m;
	ax_err         rv;

	atomic_fetch_add(&c->received, 1);
	if (ax_control_decode(payload, &m) != AX_OK) {
		atomic_fetch_add(&c->malformed, 1);
		ax_logf(
		    AX_LOG_WARN, COMP, "BAD_CONTROL", NULL,
		    "malformed control payload dropped: %s; payload: %.200s",
		    ax_err_detail(), payload);
		return;
	}
	for (int i = 0; i < 2 && m.dest[i] != NULL; i++) {
		ax_actor_item it = { .type = AX_ITEM_COMMAND,
			             .len  = (uint32_t) m.len,
			             .data = m.cmd };
		rv = ax_actor_client_send(c->client, m.dest[i], &it, 1, 0);
		if (rv == AX_OK) {
			atomic_fetch_add(&c->forwarded, 1);
			continue;
		}
		atomic_fetch_add(&c->undeliverable, 1);
		ax_logf(rv == AX_ECLOSED ? AX_LOG_INFO : AX_LOG_ERROR, COMP,
		        NULL, NULL, "control op %s not delivered to %s: %s",
		        m.op, m.dest[i], ax_err_detail());
	}
	ax_logf(AX_LOG_DEBUG, COMP, NULL, NULL, "control op %s -> %s%s%s",
	        m.op, m.dest[0], m.dest[1] ? ", " : "",
	        m.dest[1] ? m.dest[1] : "");
	ax_control_msg_fini(&m);
}

/* Waits up to us or until stop; 1 when stopping. */
static int
pause_us(ax_control *c, int64_t us)
{
	struct pollfd p = { .fd = c->wake[0], .events = POLLIN };

	(void) poll(&p, 1, (int) (us / AX_USEC_PER_MSEC));
	return atomic_load(&c->stop);
}

/* Reconnects with backoff, then asks the loader to resync. 1: stopping. */
static int
reconnect(ax_control *c)
{
	int64_t backoff = BACKOFF_MIN_US, since = ax_clock_mono_us();

	PQfinish(c->conn);
	c->conn = NULL;
	while (!atomic_load(&c->stop)) {
		if ((c->conn = listen_connect(c->ctx->dsn)) != NULL)
			break;
		ax_logf(AX_LOG_WARN, COMP, "DB_UNAVAILABLE", NULL,
		        "control connection lost, retrying in %lld ms: %s",
		        (long long) (backoff / AX_USEC_PER_MSEC),
		        ax_err_detail());
		if (pause_us(c, backoff))
			return 1;
		backoff = backoff * 2 > BACKOFF_MAX_US ? BACKOFF_MAX_US
		                                       : backoff * 2;
	}
	if (c->conn == NULL)
		return 1;
	atomic_fetch_add(&c->reconnects, 1);
	ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
	        "control connection back after %lld ms; resync sent to %s",
	        (long long) ((ax_clock_mono_us() - since) / AX_USEC_PER_MSEC),
	        AX_A_DAG_LOADER);
	forward(c, "{\"op\":\"resync\"}");
	return 0;
}

static void *
control_main(void *arg)
{
	ax_control *c = arg;
	PGnotify   *n;

	while (!atomic_load(&c->stop)) {
		struct pollfd p[2] = {
			{ .fd = c->wake[0], .events = POLLIN },
			{ .fd = -1, .events = POLLIN },
		};
		if (c->conn == NULL || PQstatus(c->conn) != CONNECTION_OK ||
		    !PQconsumeInput(c->conn)) {
			if (c->conn != NULL)
				ax_logf(AX_LOG_WARN, COMP, "DB_UNAVAILABLE",
				        NULL, "control connection lost: %s",
				        PQerrorMessage(c->conn));
			if (reconnect(c))
				break;
			continue;
		}
		while ((n = PQnotifies(c->conn)) != NULL) {
			forward(c, n->extra);
			PQfreemem(n);
		}
		p[1].fd = PQsocket(c->conn);
		if (poll(p, 2, -1) < 0 && errno != EINTR) {
			ax_logf(AX_LOG_ERROR, COMP, NULL, NULL, "poll: %s",
			        strerror(errno));
			pause_us(c, BACKOFF_MIN_US);
		}
	}
	return NULL;
}

ax_err
ax_control_start(ax_control *c, ax_actor_system *sys)
{
	ax_err rv;
	int    e;

	if (c->started)
		return ax_err_set(AX_ESTATE, "control thread already started");
	if ((rv = ax_actor_client_new(sys, COMP, &c->client)) != AX_OK)
		return rv;
	if ((e = pthread_create(&c->thread, NULL, control_main, c)) != 0) {
		ax_actor_client_free(c->client);
		c->client = NULL;
		return ax_err_set(AX_ENOMEM, "control thread: %s",
		                  strerror(e));
	}
	c->started = 1;
	return AX_OK;
}

void
ax_control_free(ax_control *c)
{
	if (c == NULL)
		return;
	if (c->started) {
		atomic_store(&c->stop, 1);
		(void) !write(c->wake[1], "x", 1);
		pthread_join(c->thread, NULL);
	}
	ax_actor_client_free(c->client);
	PQfinish(c->conn);
	close(c->wake[0]);
	close(c->wake[1]);
	free(c);
}

void
ax_control_stats_get(const ax_control *c, ax_control_stats *out)
{
	ax_control *m = (ax_control *) c;

	out->received      = atomic_load(&m->received);
	out->forwarded     = atomic_load(&m->forwarded);
	out->malformed     = atomic_load(&m->malformed);
	out->undeliverable = atomic_load(&m->undeliverable);
	out->reconnects    = atomic_load(&m->reconnects);
}
