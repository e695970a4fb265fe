/*
 * control.c - the LISTEN thread of axd (see control.h): decodes NOTIFY
 * payloads and forwards them as commands through an ax_actor_client.
 */
#include "control.h"

#include "dag_registry.h"

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
#include "store_commands.h"
#include "uuid.h"

#define COMP "control"

#define BACKOFF_MIN_US (100 * AX_USEC_PER_MSEC)
#define BACKOFF_MAX_US (5 * AX_USEC_PER_SEC)

#define RESCAN_MS                                                             \
	1000           /* wake-up while forwarded rows are pending: a         \
	                * kill is sent again this often, the rest after       \
	                * AX_CONTROL_RETRY_S; one indexed read each */
#define SCAN_SLICE 500 /* pending rows read per query */

/* A pending command this thread forwarded, and when (mono us). */
typedef struct sent_cmd {
	int64_t id;
	int64_t at;    /* forwarded at, mono us */
	int64_t retry; /* forwarded again once this long pending, us */
} sent_cmd;

struct ax_control {
	const ax_pipeline_ctx *ctx;
	PGconn                *conn;   /* NULL while disconnected */
	ax_actor_client       *client; /* used by the thread only */
	ax_store              *store;  /* thread only: reads, finishes */
	sent_cmd              *sent;   /* thread only: by id, ascending */
	size_t                 nsent, capsent;
	int                    rescan; /* thread only: the last scan failed */
	pthread_t              thread;
	int                    started; /* thread running */
	int                    wake[2]; /* pipe: main -> thread (stop) */
	atomic_int             stop;
	atomic_uint_fast64_t   received, forwarded, malformed, undeliverable,
	    reconnects, commands, rejected;
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
 * except *params (malloc'd, caller frees), *ids and *names (malloc'd
 * arrays, caller frees). */
static ax_err
decode_op(json_t *o, const char *op, Ax__ControlOp *c, ax_control_msg *m,
          char **params, int64_t **ids, char ***names)
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
	if (!strcmp(op, "rules") || !strcmp(op, "pressure") ||
	    !strcmp(op, "calendar")) {
		/* the table (rules, pool_pressure, capacity_calendars) is
		 * the truth: "look"; the queue stops work beyond a calendar
		 * that preempts */
		m->dest[0] = AX_A_RESOURCE_DETECTOR;
		if (!strcmp(op, "calendar"))
			m->dest[1] = AX_A_QUEUE;
		return AX_OK;
	}
	if (!strcmp(op, "submit")) {
		size_t  i;
		json_t *e;

		m->dest[0] = AX_A_DAG_LOADER;
		v          = json_object_get(o, "dags");
		if (v != NULL && !json_is_array(v))
			return ax_err_set(AX_EPARSE,
			                  "op 'submit': \"dags\" must be an "
			                  "array of DAG names");
		if ((*names = calloc(json_array_size(v) + 1,
		                     sizeof(**names))) == NULL)
			return ax_err_set(AX_ENOMEM, "submit dags");
		json_array_foreach(v, i, e)
		{
			/* the API records {name, id, version, outcome} */
			json_t *n =
			    json_is_object(e) ? json_object_get(e, "name") : e;
			if (!json_is_string(n) || json_string_length(n) == 0)
				return ax_err_set(
				    AX_EPARSE,
				    "op 'submit': \"dags\"[%zu] must be a "
				    "DAG name or an object with \"name\"",
				    i);
			(*names)[i] = (char *) json_string_value(n);
		}
		c->n_dags = json_array_size(v);
		c->dags   = *names;
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
	                  "unknown op '%s' (expected dag_changed, submit, "
	                  "paused, unpaused, trigger, kill, clear, mark, "
	                  "backfill, rules, pressure, calendar or resync)",
	                  op);
}

/* The static name of op (m->op outlives the JSON document). */
static const char *
op_name(const char *op)
{
	static const char *const ops[] = {
		"dag_changed", "paused",   "unpaused", "resync",   "trigger",
		"kill",        "clear",    "mark",     "backfill", "submit",
		"rules",       "pressure", "calendar"
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

/* Decodes the payload object o (borrowed) into out (zeroed first). */
static ax_err
decode_obj(json_t *o, ax_control_msg *out)
{
	Ax__Command        cmd = AX__COMMAND__INIT;
	Ax__ControlOp      c   = AX__CONTROL_OP__INIT;
	Ax__CancelInstance ci  = AX__CANCEL_INSTANCE__INIT;
	Ax__InstanceRef    ref = AX__INSTANCE_REF__INIT;
	char               trace[AX_UUID_LEN], hex[33];
	char              *params = NULL, **names = NULL;
	int64_t           *ids = NULL;
	json_t            *cid;
	const char        *op;
	ax_err             rv;
	size_t             k = 0;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(o))
		return ax_err_set(AX_EPARSE, "payload must be a JSON object");
	if ((op = req_str(o, "?", "op")) == NULL)
		return ax_err_set(AX_EPARSE,
		                  "\"op\" must be a non-empty string");
	cid = json_object_get(o, "command_id");
	if (cid != NULL &&
	    (!json_is_integer(cid) || json_integer_value(cid) <= 0))
		return ax_err_set(AX_EPARSE,
		                  "\"command_id\" must be a positive integer "
		                  "(control_command.id)");
	out->command_id = cid ? json_integer_value(cid) : 0;
	ax_uuid_v4(trace);
	for (const char *p = trace; *p != '\0' && k < 32; p++)
		if (*p != '-')
			hex[k++] = *p;
	hex[k]           = '\0';
	cmd.trace_id     = hex;
	cmd.issued_at_us = ax_clock_utc_us();
	out->op          = op_name(op);
	if (!strcmp(op, "kill")) {
		/* the instance generator remembers it for its pre hooks
		 * and forwards it to the queue */
		out->dest[0]        = AX_A_INSTANCE_GENERATOR;
		ref.instance_id     = req_id(o, op, "instance_id");
		rv                  = ref.instance_id ? AX_OK : AX_EPARSE;
		out->instance_id    = ref.instance_id;
		ci.instance         = &ref;
		ci.reason           = "MANUAL_KILL";
		cmd.body_case       = AX__COMMAND__BODY_CANCEL_INSTANCE;
		cmd.cancel_instance = &ci;
	} else {
		c.op         = (char *) out->op;
		c.command_id = out->command_id;
		rv = decode_op(o, op, &c, out, &params, &ids, &names);
		cmd.body_case = AX__COMMAND__BODY_CONTROL;
		cmd.control   = &c;
	}
	if (rv == AX_OK)
		rv = pack(&cmd, out);
	free(params);
	free(ids);
	free(names);
	if (rv != AX_OK)
		ax_control_msg_fini(out);
	return rv;
}

ax_err
ax_control_decode(const char *json, ax_control_msg *out)
{
	json_error_t jerr;
	json_t      *o;
	ax_err       rv;

	memset(out, 0, sizeof(*out));
	if (json == NULL)
		return ax_err_set(AX_EPARSE, "empty payload");
	if ((o = json_loads(json, JSON_REJECT_DUPLICATES, &jerr)) == NULL)
		return ax_err_set(AX_EPARSE, "not JSON: %d:%d: %s", jerr.line,
		                  jerr.column, jerr.text);
	rv = decode_obj(o, out);
	json_decref(o);
	return rv;
}

/* The op of a control_command kind (see engine/store_commands.h). */
static const char *
kind_op(const char *kind)
{
	if (!strcmp(kind, "pause"))
		return "paused";
	if (!strcmp(kind, "unpause"))
		return "unpaused";
	return kind; /* submit, trigger, backfill, kill, clear, mark */
}

ax_err
ax_control_decode_command(int64_t id, const char *kind, const char *body,
                          ax_control_msg *out)
{
	json_error_t jerr;
	json_t      *o;
	ax_err       rv;

	memset(out, 0, sizeof(*out));
	if (kind == NULL || !ax_cmd_kind_valid(kind))
		return ax_err_set(AX_EPARSE, "unknown command kind '%s'",
		                  kind ? kind : "(null)");
	if ((o = json_loads(body ? body : "{}", JSON_REJECT_DUPLICATES,
	                    &jerr)) == NULL)
		return ax_err_set(AX_EPARSE, "body is not JSON: %d:%d: %s",
		                  jerr.line, jerr.column, jerr.text);
	if (!json_is_object(o) ||
	    json_object_set_new(o, "op", json_string(kind_op(kind))) != 0 ||
	    json_object_set_new(o, "command_id", json_integer(id)) != 0) {
		json_decref(o);
		return ax_err_set(AX_EPARSE, "body must be a JSON object");
	}
	rv = decode_obj(o, out);
	json_decref(o);
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

/* Sends m to its actors; the number delivered. */
static int
deliver(ax_control *c, const ax_control_msg *m)
{
	int    ok = 0;
	ax_err rv;

	for (int i = 0; i < 2 && m->dest[i] != NULL; i++) {
		ax_actor_item it = { .type = AX_ITEM_COMMAND,
			             .len  = (uint32_t) m->len,
			             .data = m->cmd };
		rv = ax_actor_client_send(c->client, m->dest[i], &it, 1, 0);
		if (rv == AX_OK) {
			atomic_fetch_add(&c->forwarded, 1);
			ok++;
			continue;
		}
		atomic_fetch_add(&c->undeliverable, 1);
		ax_logf(rv == AX_ECLOSED ? AX_LOG_INFO : AX_LOG_ERROR, COMP,
		        NULL, NULL, "control op %s not delivered to %s: %s",
		        m->op, m->dest[i], ax_err_detail());
	}
	ax_logf(AX_LOG_DEBUG, COMP, NULL, NULL, "control op %s -> %s%s%s",
	        m->op, m->dest[0], m->dest[1] ? ", " : "",
	        m->dest[1] ? m->dest[1] : "");
	return ok;
}

/* A bare payload: decoded and forwarded (nothing to mark). */
static void
forward(ax_control *c, const char *payload)
{
	ax_control_msg m;

	if (ax_control_decode(payload, &m) != AX_OK) {
		atomic_fetch_add(&c->malformed, 1);
		ax_logf(
		    AX_LOG_WARN, COMP, "BAD_CONTROL", NULL,
		    "malformed control payload dropped: %s; payload: %.200s",
		    ax_err_detail(), payload);
		return;
	}
	(void) deliver(c, &m);
	ax_control_msg_fini(&m);
}

/* Writes one outcome of command id; 1 when this call set it. */
static int
finish(ax_control *c, int64_t id, ax_cmd_status st, const char *result,
       const char *reason)
{
	ax_store_cmd_done d = {
		.id = id, .status = st, .result_json = result, .reason = reason
	};

	if (ax_store_commands_finish(c->store, &d, 1, NULL) != AX_OK) {
		ax_logf(AX_LOG_WARN, COMP, NULL, NULL,
		        "command %lld: outcome not written (sent again "
		        "later): %s",
		        (long long) id, ax_err_detail());
		return 0;
	}
	if (st == AX_CMD_REJECTED && d.claimed) {
		atomic_fetch_add(&c->rejected, 1);
		ax_logf(AX_LOG_WARN, COMP, "COMMAND_REJECTED", NULL,
		        "command %lld rejected: %s", (long long) id, reason);
	}
	return d.claimed;
}

/* Sends CancelInstance(instance, run_id) to the pre-hook; 1 when sent. */
static int
send_cancel(ax_control *c, int64_t instance_id, const char *run_id)
{
	Ax__Command        cmd = AX__COMMAND__INIT;
	Ax__CancelInstance ci  = AX__CANCEL_INSTANCE__INIT;
	Ax__InstanceRef    ref = AX__INSTANCE_REF__INIT;
	ax_control_msg     m   = { .dest = { AX_A_INSTANCE_GENERATOR },
		                   .op   = "kill" };
	int                ok;

	ref.instance_id     = instance_id;
	ci.instance         = &ref;
	ci.run_id           = (char *) (run_id ? run_id : "");
	ci.reason           = "MANUAL_KILL";
	cmd.body_case       = AX__COMMAND__BODY_CANCEL_INSTANCE;
	cmd.cancel_instance = &ci;
	cmd.issued_at_us    = ax_clock_utc_us();
	if (pack(&cmd, &m) != AX_OK)
		return 0;
	ok = deliver(c, &m) > 0;
	ax_control_msg_fini(&m);
	return ok;
}

/*
 * A kill. The queue and the pre-hook act in memory (a restart forgets
 * them), so a kill stays pending until the instance has ended, and is
 * sent again every RESCAN_MS meanwhile (a kill sent twice kills once):
 * applied once the instance is CANCELED, rejected when it ended
 * otherwise or does not exist. The cancel names the current attempt's
 * run_id too, so the queue finds an attempt it adopted from a worker
 * after a restart. The instance is read from hot rows and history (a kill
 * still pending when its instance ended and its run moved to history is
 * settled by that end, not rejected as missing); its attempt matters only
 * while it is unfinished, hence always from the hot table.
 */
static void
apply_kill(ax_control *c, const ax_control_msg *m)
{
	char        ids[24], result[96], why[160];
	const char *p[1] = { ids };
	PGresult   *res  = NULL;
	ax_ti_state st;

	snprintf(ids, sizeof(ids), "%lld", (long long) m->instance_id);
	if (ax_store_query(c->store,
	                   "SELECT i.state, (SELECT a.run_id::text FROM "
	                   "attempts a WHERE a.instance_id = i.id ORDER BY "
	                   "a.number DESC LIMIT 1) FROM task_instances_all i "
	                   "WHERE i.id = $1::bigint",
	                   1, p, &res) != AX_OK)
		return; /* pending: sent again later */
	if (PQntuples(res) == 0 ||
	    ax_state_parse(PQgetvalue(res, 0, 0), &st) != AX_OK) {
		PQclear(res);
		snprintf(why, sizeof(why), "no task instance %s", ids);
		(void) finish(c, m->command_id, AX_CMD_REJECTED, NULL, why);
		return;
	}
	if (st == AX_TI_CANCELED) {
		PQclear(res);
		snprintf(result, sizeof(result),
		         "{\"instance_id\":%s,\"state\":\"CANCELED\"}", ids);
		(void) finish(c, m->command_id, AX_CMD_APPLIED, result, NULL);
		return;
	}
	if (ax_state_terminal(st)) {
		snprintf(why, sizeof(why),
		         "instance %s is %s: it ended before the kill took "
		         "effect",
		         ids, ax_state_name(st));
		PQclear(res);
		(void) finish(c, m->command_id, AX_CMD_REJECTED, NULL, why);
		return;
	}
	(void) send_cancel(c, m->instance_id, ax_store_cell(res, 0, 1));
	PQclear(res);
}

/*
 * A pause takes effect here, before the command is forwarded: the DAG
 * loader that applies it re-reads the DAG, while a trigger that follows
 * goes straight to the dependency detector and would otherwise race it
 * (a paused DAG's task starting). The API wrote dags.paused with the
 * command, so the flag set here is what the loader will read.
 */
static void
pause_now(ax_control *c, const char *kind, const char *body)
{
	json_t     *o   = json_loads(body ? body : "{}", 0, NULL);
	const char *dag = json_string_value(json_object_get(o, "dag"));

	if (dag != NULL && c->ctx->registry != NULL)
		ax_dag_registry_set_paused(c->ctx->registry, dag,
		                           !strcmp(kind, "pause"));
	json_decref(o);
}

/* Forwards pending row (id, kind, body); rejects what cannot be decoded. */
static void
apply_row(ax_control *c, int64_t id, const char *kind, const char *body)
{
	ax_control_msg m;

	atomic_fetch_add(&c->commands, 1);
	if (ax_control_decode_command(id, kind, body, &m) != AX_OK) {
		char why[600];
		snprintf(why, sizeof(why), "cannot be applied: %s",
		         ax_err_detail());
		(void) finish(c, id, AX_CMD_REJECTED, NULL, why);
		return;
	}
	if (!strcmp(kind, "pause") || !strcmp(kind, "unpause"))
		pause_now(c, kind, body);
	if (strcmp(m.op, "kill") == 0 && m.instance_id > 0)
		apply_kill(c, &m);
	else
		(void) deliver(c, &m);
	ax_control_msg_fini(&m);
}

/* The entry of id in the sorted sent[] from index *from on, or NULL. */
static sent_cmd *
sent_find(ax_control *c, int64_t id, size_t *from)
{
	while (*from < c->nsent && c->sent[*from].id < id)
		(*from)++;
	return *from < c->nsent && c->sent[*from].id == id ? &c->sent[*from]
	                                                   : NULL;
}

/*
 * Forwards every pending command, in id order, except those forwarded
 * less than AX_CONTROL_RETRY_S ago (they are on their way); the others
 * (new ones, or ones an actor could not write) go (again). Rebuilds
 * sent[] from what is pending, so applied rows leave it. A database
 * error leaves everything for the next wake-up.
 */
static void
scan_pending(ax_control *c)
{
	int64_t   now = ax_clock_mono_us(), after = 0;
	sent_cmd *next  = NULL;
	size_t    nnext = 0, cap = 0, from = 0;
	int       n;

	c->rescan = 1; /* until this scan completes */
	if (c->store == NULL &&
	    ax_store_open(c->ctx->dsn, &c->store) != AX_OK) {
		ax_logf(AX_LOG_WARN, COMP, "DB_UNAVAILABLE", NULL,
		        "pending commands not read (retried): %s",
		        ax_err_detail());
		return;
	}
	do {
		PGresult *res = NULL;
		if (ax_store_commands_pending(c->store, after, SCAN_SLICE,
		                              &res) != AX_OK) {
			ax_logf(AX_LOG_WARN, COMP, "DB_UNAVAILABLE", NULL,
			        "pending commands not read (retried): %s",
			        ax_err_detail());
			free(next);
			return;
		}
		n = PQntuples(res);
		for (int r = 0; r < n && !atomic_load(&c->stop); r++) {
			int64_t   id  = ax_store_cell_i64(res, r, AX_CMD_P_ID);
			sent_cmd *old = sent_find(c, id, &from);
			const char *kind =
			    ax_store_cell(res, r, AX_CMD_P_KIND);
			int64_t at    = now;
			int64_t retry = kind != NULL && !strcmp(kind, "kill")
			    ? RESCAN_MS * AX_USEC_PER_MSEC
			    : AX_CONTROL_RETRY_S * AX_USEC_PER_SEC;
			after         = id;
			if (old != NULL && now - old->at < old->retry)
				at = old->at;
			else
				apply_row(
				    c, id, kind,
				    ax_store_cell(res, r, AX_CMD_P_BODY));
			if (nnext == cap) {
				size_t    nc = cap ? cap * 2 : 64;
				sent_cmd *g  = realloc(next, nc * sizeof(*g));
				if (g == NULL)
					continue; /* forwarded again later */
				next = g;
				cap  = nc;
			}
			next[nnext++] =
			    (sent_cmd) { .id = id, .at = at, .retry = retry };
		}
		PQclear(res);
	} while (n == SCAN_SLICE && !atomic_load(&c->stop));
	free(c->sent);
	c->sent    = next;
	c->nsent   = nnext;
	c->capsent = cap;
	c->rescan  = 0;
}

/* Waits up to us or until stop; 1 when stopping. */
static int
pause_us(ax_control *c, int64_t us)
{
	struct pollfd p = { .fd = c->wake[0], .events = POLLIN };

	(void) poll(&p, 1, (int) (us / AX_USEC_PER_MSEC));
	return atomic_load(&c->stop);
}

/* Reconnects with backoff, then asks the loader to resync and forwards
 * every pending command again. 1: stopping. */
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
	atomic_fetch_add(&c->received, 1);
	forward(c, "{\"op\":\"resync\"}");
	forward(c, "{\"op\":\"rules\"}"); /* a rule change missed meanwhile */
	forward(c, "{\"op\":\"calendar\"}"); /* and a calendar's */
	c->nsent = 0; /* everything pending goes again */
	scan_pending(c);
	return 0;
}

/* One notification: a command row wakes a scan, a bare payload goes as
 * it is. Returns 1 when it named a command. */
static int
on_notify(ax_control *c, const char *payload)
{
	atomic_fetch_add(&c->received, 1);
	if (payload != NULL && strstr(payload, "\"command_id\"") != NULL) {
		ax_control_msg m;
		/* the row is the truth; the payload only says "look" */
		if (ax_control_decode(payload, &m) == AX_OK &&
		    m.command_id > 0) {
			ax_control_msg_fini(&m);
			return 1;
		}
		ax_control_msg_fini(&m);
	}
	forward(c, payload);
	return 0;
}

static void *
control_main(void *arg)
{
	ax_control *c = arg;
	PGnotify   *n;

	scan_pending(c); /* recorded while no axd applied them */
	while (!atomic_load(&c->stop)) {
		struct pollfd p[2] = {
			{ .fd = c->wake[0], .events = POLLIN },
			{ .fd = -1, .events = POLLIN },
		};
		int scan = 0, rc;
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
			scan |= on_notify(c, n->extra);
			PQfreemem(n);
		}
		if (scan)
			scan_pending(c);
		p[1].fd = PQsocket(c->conn);
		rc = poll(p, 2, c->nsent > 0 || c->rescan ? RESCAN_MS : -1);
		if (rc == 0)
			scan_pending(c); /* retry what is still pending */
		else if (rc < 0 && errno != EINTR) {
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
	ax_store_close(c->store);
	free(c->sent);
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
	out->commands      = atomic_load(&m->commands);
	out->rejected      = atomic_load(&m->rejected);
}
