/*
 * test_dag_loader.c - the DAG loader and the time detector at scale,
 * against a real PostgreSQL: 30,000 DAGs inserted by SQL (as a bulk
 * import would) are all armed without a single definition decoded,
 * their 60 distinct crons compiled once each, paused ones left out but
 * flagged; an unchanged restart writes no schedules row; a resync sweeps
 * the schedule of a deleted DAG and makes a changed DAG's new version
 * current while a reference to the old one stays valid. On the first
 * start a schedule due while the bulk of the schedules rows is still
 * being written fires on time, exactly once a period.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "dag.h"
#include "dag_loader.h"
#include "dag_registry.h"
#include "dag_store.h"
#include "dag_validate.h"
#include "dag_yaml.h"
#include "log.h"
#include "migrate.h"
#include "pg_harness.h"
#include "store_fixture.h"
#include "pipeline.h"
#include "store.h"
#include "time_detector.h"

static ax_test_pg            *pg;
static ax_store              *st;
static ax_config             *cfg;
static ax_pipeline_ctx        ctx;
static ax_actor_system       *sys;
static ax_time_detector_stats tstats;

static void
setup(void)
{
	ax_test_pipeline_db(&pg, &st, &cfg, &ctx);
	cr_assert_eq(ax_dag_registry_new(&ctx.registry), AX_OK);
}

static void
teardown(void)
{
	if (sys != NULL) {
		ax_actor_system_stop(sys, AX_USEC_PER_SEC, NULL);
		ax_actor_system_free(sys);
		sys = NULL;
	}
	ax_dag_registry_free(ctx.registry);
	ax_config_free(cfg);
	ax_store_close(st);
	ax_test_pg_stop(pg);
}

TestSuite(dag_loader, .init = setup, .fini = teardown, .timeout = 240);

/* The loader and the time detector only: nothing here fires. */
static void
start_system(void)
{
	memset(&tstats, 0, sizeof(tstats));
	cr_assert_eq(ax_actor_system_new(&sys), AX_OK);
	cr_assert_eq(ax_dag_loader_add(sys, &ctx), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_time_detector_add_ex(sys, &ctx, &tstats), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_actor_system_start(sys), AX_OK, "%s", ax_err_detail());
}

/* Waits until the time detector received n items, then stops (which
 * drains: every item sent is handled before the stats are read). */
static void
stop_after(uint64_t n)
{
	ax_actor      *td = ax_actor_system_find(sys, AX_A_TIME_DETECTOR);
	ax_actor_stats as = { 0 };
	int64_t        dl = ax_clock_mono_us() + 120 * AX_USEC_PER_SEC;

	do {
		ax_clock_sleep_us(50 * AX_USEC_PER_MSEC);
		ax_actor_stats_get(td, &as);
	} while (as.items_in < n && ax_clock_mono_us() < dl);
	cr_assert_geq(as.items_in, n, "time detector got %llu of %llu items",
	              (unsigned long long) as.items_in,
	              (unsigned long long) n);
	ax_actor_system_stop(sys, 10 * AX_USEC_PER_SEC, NULL);
	ax_actor_system_free(sys);
	sys = NULL;
}

static int64_t
store_dag(const char *yaml)
{
	return ax_test_store_dag(st, yaml).version_id;
}

#define q_int(...) ax_test_q_int(st, __VA_ARGS__)

static void
exec(const char *sql)
{
	cr_assert_eq(ax_store_exec(st, sql, 0, NULL), AX_OK, "%s: %s", sql,
	             ax_err_detail());
}

static void
control(const char *op, const char *dag)
{
	Ax__Command   cmd = AX__COMMAND__INIT;
	Ax__ControlOp c   = AX__CONTROL_OP__INIT;

	c.op          = (char *) op;
	c.dag         = (char *) dag;
	cmd.body_case = AX__COMMAND__BODY_CONTROL;
	cmd.control   = &c;
	ax_test_send(sys, AX_A_DAG_LOADER, &cmd);
}

#define N_DAGS 30000

/* One DAG stored normally, cloned n - 1 times by SQL (as a bulk import
 * would): clone g fires every 1 January at second g % 60 (60 distinct
 * crons). */
static void
import_dags(int n)
{
	char sql[256];

	store_dag("kind: DAG\nname: imp.0000000\n"
	          "schedule: {cron: \"0 0 0 1 1 ?\"}\n"
	          "tasks:\n  - {name: t, command: /bin/true}\n");
	snprintf(sql, sizeof(sql),
	         "INSERT INTO dags (name) SELECT 'imp.' || "
	         "lpad(g::text, 7, '0') FROM generate_series(1, %d) g",
	         n - 1);
	exec(sql);
	exec("INSERT INTO dag_versions (dag_id, version, content_hash, yaml,"
	     " definition, source) SELECT d.id, 1,"
	     " encode(sha256(convert_to(d.name, 'UTF8')), 'hex'), v.yaml,"
	     " jsonb_set(jsonb_set(v.definition, '{name}', to_jsonb(d.name)),"
	     " '{schedule,cron}', to_jsonb(format('%s 0 0 1 1 ?',"
	     " substr(d.name, 5)::int % 60))), 'sql'"
	     " FROM dags d, dag_versions v JOIN dags d0 ON"
	     " d0.active_version_id = v.id AND d0.name = 'imp.0000000'"
	     " WHERE d.active_version_id IS NULL");
	exec("UPDATE dags d SET active_version_id = v.id FROM dag_versions v"
	     " WHERE v.dag_id = d.id AND d.active_version_id IS NULL");
}

Test(dag_loader, arms_30k_sql_inserted_dags_without_decoding_any)
{
	ax_dag_registry_stats rs;
	int64_t               t0;

	import_dags(N_DAGS);
	/* 30 of them paused: flagged, not armed */
	exec("UPDATE dags SET paused = true"
	     " WHERE substr(name, 5)::int % 1000 = 7");
	cr_assert_eq(q_int("SELECT count(DISTINCT schedule_expr) FROM "
	                   "dag_versions"),
	             60, "migration 0005 columns on SQL-inserted rows");

	t0 = ax_clock_mono_us();
	start_system();
	stop_after(N_DAGS - 30 + 1); /* the armed ones and the sweep */
	printf("dag_loader: %d DAGs armed in %.2f s\n", N_DAGS - 30,
	       (double) (ax_clock_mono_us() - t0) / 1e6);

	cr_assert_eq(tstats.armed, N_DAGS - 30, "armed %llu",
	             (unsigned long long) tstats.armed);
	cr_assert_eq(tstats.specs, 60, "compiled specs %llu",
	             (unsigned long long) tstats.specs);
	ax_dag_registry_stats_get(ctx.registry, &rs);
	cr_assert_eq(rs.loads, 0, "%llu definitions decoded",
	             (unsigned long long) rs.loads);
	cr_assert_eq(rs.entries, 0);
	cr_assert(ax_dag_registry_paused(ctx.registry, "imp.0000007"));
	cr_assert(ax_dag_registry_paused(ctx.registry, "imp.0029007"));
	cr_assert_not(ax_dag_registry_paused(ctx.registry, "imp.0000008"));
	/* every schedules row written, with its own next fire */
	cr_assert_eq(q_int("SELECT count(*) FROM schedules"), N_DAGS);
	cr_assert_eq(q_int("SELECT count(*) FROM schedules s"
	                   " JOIN dags d ON d.id = s.dag_id"
	                   " WHERE d.name = 'imp.0012345' AND next_fire_at ="
	                   " date_trunc('year', now() AT TIME ZONE 'UTC' +"
	                   " interval '1 year') AT TIME ZONE 'UTC' +"
	                   " interval '45 s'"),
	             1, "next fire of imp.0012345: 1 January, 00:00:45");
	cr_assert_eq(q_int("SELECT count(DISTINCT next_fire_at) FROM "
	                   "schedules"),
	             60);

	/* an unchanged restart writes nothing and arms the same */
	int64_t mark = q_int("SELECT ax_us(max(updated_at)) FROM schedules");
	start_system();
	stop_after(N_DAGS - 30 + 1);
	cr_assert_eq(tstats.armed, N_DAGS - 30);
	cr_assert_eq(q_int("SELECT ax_us(max(updated_at)) FROM schedules"),
	             mark, "a restart rewrote schedules rows");
}

Test(dag_loader, resync_sweeps_deleted_dags_and_picks_up_new_versions)
{
	ax_dag_entry *old, *cur;
	int64_t       v1, v2;

	v1 = store_dag("kind: DAG\nname: a\n"
	               "schedule: {cron: \"0 0 0 1 1 ?\"}\n"
	               "tasks:\n  - {name: t, command: echo one}\n");
	store_dag("kind: DAG\nname: b\n"
	          "schedule: {cron: \"0 0 0 1 1 ?\"}\n"
	          "tasks:\n  - {name: t, command: echo b}\n");
	store_dag("kind: DAG\nname: c\n"
	          "schedule: {cron: \"0 0 0 2 1 ?\"}\n"
	          "tasks:\n  - {name: t, command: echo c}\n");
	start_system();
	ax_clock_sleep_us(500 * AX_USEC_PER_MSEC);
	/* a miss reads the active version */
	old = ax_dag_registry_current(ctx.registry, "a");
	cr_assert_not_null(old);
	cr_assert_eq(old->version_id, v1);
	cr_assert_str_eq(old->dag->tasks[0].eff.command, "echo one");

	/* while the control connection was down: a changed, c deleted */
	v2 = store_dag("kind: DAG\nname: a\n"
	               "schedule: {cron: \"0 0 0 1 1 ?\"}\n"
	               "tasks:\n  - {name: t, command: echo two}\n");
	exec("DELETE FROM dags WHERE name = 'c'");
	control("resync", NULL);
	/* 3 arms + sweep, then 2 arms + sweep */
	stop_after(7);
	cr_assert_eq(tstats.armed, 2);
	cr_assert_eq(tstats.swept, 1);
	cr_assert_eq(tstats.specs, 1, "b and a share their spec");

	cur = ax_dag_registry_current(ctx.registry, "a");
	cr_assert_not_null(cur);
	cr_assert_eq(cur->version_id, v2);
	cr_assert_str_eq(cur->dag->tasks[0].eff.command, "echo two");
	/* the old version is intact while referenced */
	cr_assert_str_eq(old->dag->tasks[0].eff.command, "echo one");
	ax_dag_entry *again = ax_dag_registry_version(ctx.registry, v1);
	cr_assert_eq(again, old);
	ax_dag_entry_release(again);
	ax_dag_entry_release(old);
	ax_dag_entry_release(cur);
	cr_assert_null(ax_dag_registry_current(ctx.registry, "c"));
}

Test(dag_loader, dag_changed_makes_the_new_version_current)
{
	ax_dag_entry *e;
	int64_t       v2;

	store_dag("kind: DAG\nname: x\n"
	          "tasks:\n  - {name: t, command: echo one}\n");
	start_system();
	ax_clock_sleep_us(300 * AX_USEC_PER_MSEC);
	e = ax_dag_registry_current(ctx.registry, "x");
	cr_assert_not_null(e);
	ax_dag_entry_release(e);
	v2 = store_dag("kind: DAG\nname: x\n"
	               "tasks:\n  - {name: t, command: echo two}\n");
	/* cached: without the notification the old version stays current */
	e = ax_dag_registry_current(ctx.registry, "x");
	cr_assert_neq(e->version_id, v2);
	ax_dag_entry_release(e);
	control("dag_changed", "x");
	ax_clock_sleep_us(300 * AX_USEC_PER_MSEC);
	e = ax_dag_registry_current(ctx.registry, "x");
	cr_assert_not_null(e);
	cr_assert_eq(e->version_id, v2);
	cr_assert_str_eq(e->dag->tasks[0].eff.command, "echo two");
	ax_dag_entry_release(e);
}

#define N_DUE_DAGS 8000

/*
 * First start over 8,000 imported DAGs (no schedules row) and a DAG
 * "fast" firing every second, stored last (the highest id, the last
 * slice). The schedules rows of the January ones are written after the
 * due ones are armed: while another transaction holds a lock on one of
 * them (its row cannot be written, the load cannot finish), fast fires,
 * once a second with no period missed, and keeps firing once the load
 * is done.
 */
Test(dag_loader, a_schedule_due_during_the_first_load_fires_once_a_period)
{
	ax_store *locker = NULL;
	int64_t t0, dl, fast_runs, held, fast_sched, imp_sched, first, last, n;

	import_dags(N_DUE_DAGS);
	store_dag("kind: DAG\nname: fast\n"
	          "schedule: {cron: \"* * * * * ?\"}\n"
	          "tasks:\n  - {name: t, command: /bin/true}\n");
	cr_assert_eq(ax_store_open(ctx.dsn, &locker), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_store_exec(locker, "BEGIN", 0, NULL), AX_OK);
	cr_assert_eq(ax_store_exec(locker,
	                           "SELECT id FROM dags WHERE name = "
	                           "'imp.0006000' FOR UPDATE",
	                           0, NULL),
	             AX_OK, "%s", ax_err_detail());
	t0 = q_int("SELECT ax_us(now())");
	start_system();

	/* fast fires while imp.0006000's row waits for the lock; what the
	 * test saw is read before the lock is released (an assertion that
	 * fails must not leave the load blocked) */
	dl = ax_clock_mono_us() + 60 * AX_USEC_PER_SEC;
	while ((fast_runs = q_int("SELECT count(*) FROM dag_runs r JOIN dags"
	                          " d ON d.id = r.dag_id"
	                          " WHERE d.name = 'fast'")) < 2 &&
	       ax_clock_mono_us() < dl)
		ax_clock_sleep_us(50 * AX_USEC_PER_MSEC);
	held       = q_int("SELECT count(*) FROM schedules s JOIN dags d ON"
	                         " d.id = s.dag_id WHERE d.name = 'imp.0006000'");
	fast_sched = q_int("SELECT coalesce(min(s.id), 0) FROM schedules s"
	                   " JOIN dags d ON d.id = s.dag_id"
	                   " WHERE d.name = 'fast'");
	imp_sched  = q_int("SELECT coalesce(min(s.id), 9223372036854775807)"
	                    " FROM schedules s JOIN dags d ON d.id = s.dag_id"
	                    " WHERE d.name LIKE 'imp.%%'");
	cr_assert_eq(ax_store_exec(locker, "COMMIT", 0, NULL), AX_OK);
	ax_store_close(locker);
	cr_assert_geq(fast_runs, 2,
	              "fast did not fire while the load was held");
	cr_assert_eq(held, 0, "the load finished: the lock held nothing up");
	cr_assert_gt(fast_sched, 0);
	cr_assert_lt(fast_sched, imp_sched,
	             "fast's row was not written before the later ones");

	stop_after(N_DUE_DAGS + 1 + 1); /* every schedule and the sweep */
	cr_assert_eq(tstats.armed, N_DUE_DAGS + 1);
	cr_assert_eq(q_int("SELECT count(*) FROM schedules"), N_DUE_DAGS + 1);
	cr_assert_eq(q_int("SELECT count(*) FROM dag_runs r JOIN dags d ON"
	                   " d.id = r.dag_id WHERE d.name <> 'fast'"),
	             0);

	/* one run a second from the first fire after the start: none
	 * twice, none skipped */
	first = q_int("SELECT ax_us(min(r.logical_date)) FROM dag_runs r"
	              " JOIN dags d ON d.id = r.dag_id WHERE d.name = 'fast'");
	last  = q_int("SELECT ax_us(max(r.logical_date)) FROM dag_runs r"
	               " JOIN dags d ON d.id = r.dag_id WHERE d.name = 'fast'");
	n     = q_int("SELECT count(*) FROM dag_runs r JOIN dags d ON"
	                  " d.id = r.dag_id WHERE d.name = 'fast'");
	cr_assert_geq(n, 2);
	cr_assert_eq((last - first) / AX_USEC_PER_SEC + 1, n,
	             "%lld runs between %lld and %lld", (long long) n,
	             (long long) first, (long long) last);
	cr_assert_eq(n,
	             q_int("SELECT count(DISTINCT r.logical_date) FROM"
	                   " dag_runs r JOIN dags d ON d.id = r.dag_id"
	                   " WHERE d.name = 'fast'"));
	cr_assert_gt(first + AX_USEC_PER_SEC, t0,
	             "a period before the start fired");
	cr_assert_leq(first, t0 + 30 * AX_USEC_PER_SEC);
	/* the schedules row moved on with the fires */
	cr_assert_eq(q_int("SELECT count(*) FROM schedules s JOIN dags d ON"
	                   " d.id = s.dag_id WHERE d.name = 'fast' AND"
	                   " s.last_fire_at IS NOT NULL AND"
	                   " s.next_fire_at > s.last_fire_at"),
	             1);
}
