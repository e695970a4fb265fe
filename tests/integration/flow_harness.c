/*
 * flow_harness.c - the fixture of the flow actors' integration tests
 * (tests/integration/test_flow.c, test_admission.c): a real PostgreSQL
 * with one DAG and one run, the actor system the tests compose, and
 * capture actors standing in for the neighbours a test does not run.
 * See flow_harness.h.
 */
#include "flow_harness.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "dag_store.h"
#include "dag_validate.h"
#include "dag_yaml.h"
#include "log.h"
#include "tz.h"

/* ---------------------------------------------------------------------- */
/* capture actors */

typedef struct cap_item {
	char     dest[64];
	uint32_t type;
	size_t   len;
	uint8_t *data;
} cap_item;

static pthread_mutex_t cap_mu = PTHREAD_MUTEX_INITIALIZER;
static cap_item        caps[20000];
static size_t          ncaps;

static ax_err
cap_handle(ax_actor *self, void *state, const ax_actor_item *items, size_t n)
{
	(void) state;
	pthread_mutex_lock(&cap_mu);
	for (size_t i = 0; i < n && ncaps < 20000; i++) {
		cap_item *c = &caps[ncaps++];
		snprintf(c->dest, sizeof(c->dest), "%s", ax_actor_name(self));
		c->type = items[i].type;
		c->len  = items[i].len;
		c->data = malloc(items[i].len + 1);
		memcpy(c->data, items[i].data, items[i].len);
	}
	pthread_mutex_unlock(&cap_mu);
	return AX_OK;
}

static const ax_actor_ops cap_ops = { .handle = cap_handle };

void
add_capture(ax_actor_system *into, const char *name)
{
	ax_actor_config c = { .name = name };
	cr_assert_eq(ax_actor_system_add(into, &c, &cap_ops, NULL, NULL),
	             AX_OK, "%s", ax_err_detail());
}

/* The k-th (0-based) command of kind to dest, or NULL; free it. */
Ax__Command *
cap_cmd(const char *dest, Ax__Command__BodyCase kind, size_t k)
{
	Ax__Command *out = NULL;
	pthread_mutex_lock(&cap_mu);
	for (size_t i = 0; i < ncaps && out == NULL; i++) {
		if (strcmp(caps[i].dest, dest) ||
		    caps[i].type != AX_ITEM_COMMAND)
			continue;
		Ax__Command *c =
		    ax__command__unpack(NULL, caps[i].len, caps[i].data);
		if (c != NULL && c->body_case == kind && k-- == 0)
			out = c;
		else if (c != NULL)
			ax__command__free_unpacked(c, NULL);
	}
	pthread_mutex_unlock(&cap_mu);
	return out;
}

size_t
cap_count(const char *dest, Ax__Command__BodyCase kind)
{
	size_t n = 0;
	for (Ax__Command *c; (c = cap_cmd(dest, kind, n)) != NULL; n++)
		ax__command__free_unpacked(c, NULL);
	return n;
}

/* Events captured with this type (and reason when not NULL) whose
 * payload contains needle (when not NULL). */
size_t
cap_events_with(const char *type, const char *reason, const char *needle)
{
	size_t n = 0;
	pthread_mutex_lock(&cap_mu);
	for (size_t i = 0; i < ncaps; i++) {
		if (caps[i].type != AX_ITEM_EVENT)
			continue;
		Ax__Event *e =
		    ax__event__unpack(NULL, caps[i].len, caps[i].data);
		if (e != NULL && strcmp(e->type, type) == 0 &&
		    (reason == NULL || strcmp(e->reason, reason) == 0) &&
		    (needle == NULL ||
		     strstr(e->payload_json, needle) != NULL))
			n++;
		if (e != NULL)
			ax__event__free_unpacked(e, NULL);
	}
	pthread_mutex_unlock(&cap_mu);
	return n;
}

size_t
cap_events(const char *type, const char *reason)
{
	return cap_events_with(type, reason, NULL);
}

int
wait_events(const char *type, const char *reason, size_t n)
{
	for (int i = 0; i < 500; i++) {
		if (cap_events(type, reason) >= n)
			return 1;
		ax_clock_sleep_us(10000);
	}
	return 0;
}

int
wait_count(const char *dest, Ax__Command__BodyCase kind, size_t n)
{
	for (int i = 0; i < 500; i++) {
		if (cap_count(dest, kind) >= n)
			return 1;
		ax_clock_sleep_us(10000);
	}
	return 0;
}

/* ---------------------------------------------------------------------- */
/* fixture */

const char *DAG_YAML =
    "kind: DAG\n"
    "name: flow.test\n"
    "schedule: {cron: \"0 30 2 * * ?\", timezone: Asia/Shanghai}\n"
    "params: {region: eu}\n"
    "tasks:\n"
    "  - {name: a, type: bash, command: \"echo {{ ds }} {{ params.region }} "
    "{{ data_interval_end }}\", env: {OUT: \"/data/{{ ds_nodash }}\"}}\n"
    "  - {name: r, type: bash, command: \"false\", retries: {count: 2, "
    "backoff: exponential, delay: 10s, max_delay: 15s}}\n"
    "  - {name: t, type: bash, command: \"sleep 9\", timeout: 5s}\n"
    "  - {name: u, type: bash, command: \"true\", retries: {count: 1, delay: "
    "2s}}\n";

ax_test_pg      *pg;
ax_store        *db;
ax_config       *cfg;
ax_dag_registry *reg;
ax_dag_entry    *entry;
ax_pipeline_ctx  ctx;
ax_actor_system *sys;
ax_actor_client *cli;
int64_t          dag_id, version_id, run_id, logical_us;

int64_t
q64(const char *sql)
{
	int64_t v = -1;
	cr_assert_eq(ax_store_query_int64(db, sql, 0, NULL, &v), AX_OK,
	             "%s: %s", sql, ax_err_detail());
	return v;
}

void
flow_setup(void)
{
	ax_dagset          *set;
	ax_dag_store_result res;
	char                sql[512];

	ax_log_init(AX_LOG_ERROR, 2);
	ncaps = 0;
	cr_assert_eq(ax_test_pg_start_migrated(&pg), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &db), AX_OK);
	cr_assert_eq(ax_config_load(NULL, &cfg), AX_OK);
	cr_assert_eq(ax_dag_registry_new(&reg), AX_OK);
	cr_assert_eq(ax_dagset_new(NULL, &set), AX_OK);
	cr_assert_eq(
	    ax_dag_yaml_load_buf(set, "flow.yaml", DAG_YAML, strlen(DAG_YAML)),
	    AX_OK);
	cr_assert_eq(ax_dagset_validate(set), AX_OK, "DAG invalid");
	cr_assert_eq(ax_dag_store_submit(db, set->dags[0], "test", &res),
	             AX_OK, "%s", ax_err_detail());
	dag_id     = res.id;
	version_id = res.version_id;
	cr_assert_eq(ax_dag_registry_publish(reg, dag_id, version_id, set,
	                                     set->dags[0]),
	             AX_OK, "%s", ax_err_detail());
	entry = ax_dag_registry_current(reg, "flow.test");
	cr_assert_not_null(entry);
	/* 2026-03-02 02:30 in Shanghai */
	cr_assert_eq(
	    ax_tz_parse_iso8601("2026-03-01T18:30:00Z", NULL, &logical_us),
	    AX_OK);
	snprintf(sql, sizeof(sql),
	         "INSERT INTO dag_runs (dag_id, dag_version_id, run_type, "
	         "logical_date, interval_start, interval_end) VALUES (%lld, "
	         "%lld, 'scheduled', ax_ts(%lld), ax_ts(%lld), ax_ts(%lld)) "
	         "RETURNING id",
	         (long long) dag_id, (long long) version_id,
	         (long long) logical_us, (long long) logical_us,
	         (long long) (logical_us + 86400LL * AX_USEC_PER_SEC));
	run_id       = q64(sql);
	ctx.cfg      = cfg;
	ctx.dsn      = ax_test_pg_dsn(pg);
	ctx.home     = "/tmp/ax-flow-home";
	ctx.registry = reg;
	cr_assert_eq(ax_actor_system_new(&sys), AX_OK);
}

void
flow_start(void)
{
	cr_assert_eq(ax_actor_system_start(sys), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_actor_client_new(sys, "test", &cli), AX_OK);
}

void
flow_teardown(void)
{
	ax_actor_client_free(cli);
	cli = NULL;
	ax_actor_system_free(sys);
	ax_dag_entry_release(entry);
	ax_dag_registry_free(reg);
	ax_config_free(cfg);
	ax_store_close(db);
	ax_test_pg_stop(pg);
	for (size_t i = 0; i < ncaps; i++)
		free(caps[i].data);
	ncaps = 0;
}

/* Sends cmds[0..n) to dest as one envelope. */
void
send_cmds(const char *dest, Ax__Command **cmds, size_t n)
{
	ax_actor_item items[16];
	uint8_t      *bufs[16];
	cr_assert(n <= 16);
	for (size_t i = 0; i < n; i++) {
		size_t len = ax__command__get_packed_size(cmds[i]);
		bufs[i]    = malloc(len + 1);
		ax__command__pack(cmds[i], bufs[i]);
		items[i] = (ax_actor_item) { .type = AX_ITEM_COMMAND,
			                     .len  = (uint32_t) len,
			                     .data = bufs[i] };
	}
	cr_assert_eq(ax_actor_client_send(cli, dest, items, n, 0), AX_OK, "%s",
	             ax_err_detail());
	for (size_t i = 0; i < n; i++)
		free(bufs[i]);
}

void
send1(const char *dest, Ax__Command *c)
{
	send_cmds(dest, &c, 1);
}

/* An InstanceRef of task in the test run (strings static). */
Ax__InstanceRef
ref_of(const char *task, int shard)
{
	Ax__InstanceRef r = AX__INSTANCE_REF__INIT;
	r.dag             = "flow.test";
	r.dag_version_id  = version_id;
	r.dag_run_id      = run_id;
	r.task            = (char *) task;
	r.logical_time_us = logical_us;
	r.shard_index     = shard;
	r.shard_total     = 1;
	return r;
}

int
wait_comp_stat(const char *comp, const char *key, int64_t want)
{
	const char *p[2] = { comp, key };
	int64_t     got  = -1;
	for (int i = 0; i < 1000; i++) {
		got = -1;
		(void) ax_store_query_int64(
		    db,
		    "SELECT coalesce((SELECT value FROM component_stats WHERE "
		    "component = $1 AND key = $2), -1)",
		    2, p, &got);
		if (got == want)
			return 1;
		ax_clock_sleep_us(10000);
	}
	cr_log_error("%s = %lld, want %lld", key, (long long) got,
	             (long long) want);
	return 0;
}
