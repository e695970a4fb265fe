/*
 * test_dag_registry.c - the shared registry of DAG versions: publish makes
 * a version current, a reference keeps a superseded version alive until
 * released, paused flags, O(1) task lookup, concurrent readers during
 * publishes, and loading a stored version back from PostgreSQL (hash
 * equal to the stored content hash). With a source (registry_lazy): a
 * miss reads the active version once, the bound evicts only unreferenced
 * entries, paused flags survive eviction, a version change while the old
 * entry is held, and the start-up warm-up of the DAGs due soon.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "dag.h"
#include "dag_registry.h"
#include "dag_store.h"
#include "dag_validate.h"
#include "dag_yaml.h"
#include "log.h"
#include "pg_harness.h"
#include "store.h"

/* A validated set with one DAG `name` whose tasks echo `tag`. */
static ax_dagset *
make_set(const char *name, const char *tag, ax_dag **dag)
{
	char       yaml[1024];
	ax_dagset *set;

	snprintf(yaml, sizeof(yaml),
	         "kind: DAG\nname: %s\n"
	         "schedule: {cron: \"* * * * * ?\"}\n"
	         "tasks:\n"
	         "  - {name: a, command: echo %s}\n"
	         "  - {name: b, command: echo b, depends_on: [a]}\n"
	         "  - {name: c, command: echo c, depends_on: [a]}\n"
	         "  - {name: d, command: echo d, depends_on: [b, c]}\n",
	         name, tag);
	cr_assert_eq(ax_dagset_new(NULL, &set), AX_OK);
	ax_dag_yaml_load_buf(set, "t.yaml", yaml, strlen(yaml));
	ax_dagset_validate(set);
	cr_assert_eq(ax_dagset_error_count(set, NULL), 0);
	*dag = set->dags[0];
	return set;
}

Test(dag_registry, publish_current_and_old_versions_live_while_held)
{
	ax_dag_registry *reg;
	ax_dag          *d;
	ax_dagset       *s;
	size_t           ndags, nent;

	ax_log_init(AX_LOG_ERROR, 2);
	cr_assert_eq(ax_dag_registry_new(&reg), AX_OK);
	cr_assert_null(ax_dag_registry_current(reg, "x"));
	s = make_set("x", "v1", &d);
	cr_assert_eq(ax_dag_registry_publish(reg, 7, 100, s, d), AX_OK);
	ax_dag_entry *v1 = ax_dag_registry_current(reg, "x");
	cr_assert_not_null(v1);
	cr_assert_eq(v1->version_id, 100);
	cr_assert_eq(v1->dag_id, 7);
	cr_assert_str_eq(v1->dag->tasks[0].eff.command, "echo v1");

	/* a new version becomes current; v1 stays alive while held */
	s = make_set("x", "v2", &d);
	cr_assert_eq(ax_dag_registry_publish(reg, 7, 101, s, d), AX_OK);
	ax_dag_entry *cur = ax_dag_registry_current(reg, "x");
	cr_assert_eq(cur->version_id, 101);
	ax_dag_entry *old = ax_dag_registry_version(reg, 100);
	cr_assert_eq(old, v1);
	cr_assert_str_eq(old->dag->tasks[0].eff.command, "echo v1");
	ax_dag_registry_counts(reg, &ndags, &nent);
	cr_assert_eq(ndags, 1);
	cr_assert_eq(nent, 2);
	ax_dag_entry_release(old);
	ax_dag_entry_release(v1);
	/* last reference gone: version 100 is no longer found */
	cr_assert_null(ax_dag_registry_version(reg, 100));
	ax_dag_registry_counts(reg, &ndags, &nent);
	cr_assert_eq(nent, 1);

	/* republishing the current version is a no-op */
	s = make_set("x", "v2", &d);
	cr_assert_eq(ax_dag_registry_publish(reg, 7, 101, s, d), AX_OK);
	ax_dag_entry *same = ax_dag_registry_current(reg, "x");
	cr_assert_eq(same, cur);
	ax_dag_entry_release(same);

	/* tasks by name, O(1) */
	cr_assert_eq(ax_dag_entry_task_index(cur, "d"), 3);
	cr_assert_str_eq(ax_dag_entry_task(cur, "b")->name, "b");
	cr_assert_null(ax_dag_entry_task(cur, "zz"));
	cr_assert_eq(ax_dag_entry_task_index(cur, "zz"), -1);

	/* remove: gone by name, still alive while held */
	cr_assert_eq(ax_dag_registry_remove(reg, "x"), AX_OK);
	cr_assert_null(ax_dag_registry_current(reg, "x"));
	cr_assert_eq(ax_dag_registry_remove(reg, "x"), AX_ENOENT);
	cr_assert_str_eq(cur->dag->name, "x");
	ax_dag_entry *again = ax_dag_registry_version(reg, 101);
	cr_assert_eq(again, cur);
	ax_dag_entry_release(again);
	ax_dag_entry_release(cur);
	cr_assert_null(ax_dag_registry_version(reg, 101));
	ax_dag_registry_free(reg);
}

Test(dag_registry, bad_publish_is_refused_and_set_freed)
{
	ax_dag_registry *reg;
	ax_dag          *d;
	ax_dagset       *s;

	cr_assert_eq(ax_dag_registry_new(&reg), AX_OK);
	s = make_set("x", "v1", &d);
	cr_assert_eq(ax_dag_registry_publish(reg, 0, 1, s, d), AX_EINVAL);
	s = make_set("x", "v1", &d);
	cr_assert_eq(ax_dag_registry_publish(reg, 1, -1, s, d), AX_EINVAL);
	s = make_set("x", "v1", &d);
	cr_assert_eq(ax_dag_registry_publish(reg, 1, 1, s, NULL), AX_EINVAL);
	cr_assert_null(ax_dag_registry_current(reg, "x"));
	ax_dag_registry_free(reg);
}

Test(dag_registry, paused_flags)
{
	ax_dag_registry *reg;
	ax_dag          *d;

	cr_assert_eq(ax_dag_registry_new(&reg), AX_OK);
	cr_assert_eq(ax_dag_registry_paused(reg, "x"), 0);
	ax_dag_registry_set_paused(reg, "x", 1); /* before any version */
	cr_assert_eq(ax_dag_registry_paused(reg, "x"), 1);
	ax_dagset *s = make_set("x", "a", &d);
	cr_assert_eq(ax_dag_registry_publish(reg, 1, 1, s, d), AX_OK);
	cr_assert_eq(ax_dag_registry_paused(reg, "x"), 1);
	cr_assert_eq(ax_dag_registry_paused(reg, "y"), 0);
	ax_dag_registry_set_paused(reg, "x", 0);
	cr_assert_eq(ax_dag_registry_paused(reg, "x"), 0);
	ax_dag_registry_free(reg);
}

/* --- readers racing publishes --------------------------------------------
 */

typedef struct race {
	ax_dag_registry *reg;
	volatile int     stop;
	long             seen;
} race;

static void *
reader(void *arg)
{
	race *r = arg;
	while (!r->stop) {
		ax_dag_entry *e = ax_dag_registry_current(r->reg, "hot");
		if (e != NULL) {
			/* the DAG must be intact while we hold it */
			cr_assert_eq(e->dag->n_tasks, 4);
			cr_assert_eq(ax_dag_entry_task_index(e, "d"), 3);
			ax_dag_entry *v =
			    ax_dag_registry_version(r->reg, e->version_id - 1);
			ax_dag_entry_release(v);
			ax_dag_entry_release(e);
			r->seen++;
		}
	}
	return NULL;
}

Test(dag_registry, concurrent_readers_during_publishes)
{
	race      r = { 0 };
	pthread_t th[3];
	ax_dag   *d;
	size_t    nent;

	cr_assert_eq(ax_dag_registry_new(&r.reg), AX_OK);
	for (int i = 0; i < 3; i++)
		pthread_create(&th[i], NULL, reader, &r);
	for (int v = 1; v <= 300; v++) {
		char tag[16];
		snprintf(tag, sizeof(tag), "v%d", v);
		ax_dagset *s = make_set("hot", tag, &d);
		cr_assert_eq(ax_dag_registry_publish(r.reg, 1, v, s, d),
		             AX_OK);
	}
	r.stop = 1;
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	ax_dag_registry_counts(r.reg, NULL, &nent);
	cr_assert_eq(nent, 1, "superseded versions were freed: %zu", nent);
	ax_dag_entry *e = ax_dag_registry_current(r.reg, "hot");
	cr_assert_eq(e->version_id, 300);
	ax_dag_entry_release(e);
	ax_dag_registry_free(r.reg);
}

/* --- load_version from PostgreSQL ----------------------------------------
 */

Test(dag_registry, load_version_from_store, .timeout = 120)
{
	ax_test_pg         *pg;
	ax_store           *st;
	ax_dag_registry    *reg;
	ax_dag_store_result r1, r2;
	ax_dag             *d;
	ax_dagset          *s1, *s2;
	char                h1[AX_SHA256_HEX_LEN];

	ax_log_init(AX_LOG_ERROR, 2);
	cr_assert_eq(ax_test_pg_start_migrated(&pg), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &st), AX_OK);
	s1 = make_set("ld", "v1", &d);
	memcpy(h1, d->hash, sizeof(h1));
	cr_assert_eq(ax_dag_store_submit(st, d, "t.yaml", &r1), AX_OK, "%s",
	             ax_err_detail());
	s2 = make_set("ld", "v2", &d);
	cr_assert_eq(ax_dag_store_submit(st, d, "t.yaml", &r2), AX_OK);
	cr_assert_neq(r1.version_id, r2.version_id);

	cr_assert_eq(ax_dag_registry_new(&reg), AX_OK);
	/* the old version: pinned, not current */
	cr_assert_eq(ax_dag_registry_load_version(reg, st, r1.version_id),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_null(ax_dag_registry_current(reg, "ld"));
	ax_dag_entry *e1 = ax_dag_registry_version(reg, r1.version_id);
	cr_assert_not_null(e1);
	cr_assert_str_eq(e1->dag->hash, h1);
	cr_assert_eq(e1->dag_id, r1.id);
	cr_assert_str_eq(e1->dag->tasks[0].eff.command, "echo v1");
	cr_assert_eq(e1->dag->tasks[3].n_depends, 2);
	ax_dag_entry_release(e1);
	/* pinned: still there after our release */
	e1 = ax_dag_registry_version(reg, r1.version_id);
	cr_assert_not_null(e1);
	ax_dag_entry_release(e1);

	/* the active version becomes current; loading twice is a no-op */
	cr_assert_eq(ax_dag_registry_load_version(reg, st, r2.version_id),
	             AX_OK);
	cr_assert_eq(ax_dag_registry_load_version(reg, st, r2.version_id),
	             AX_OK);
	ax_dag_entry *c = ax_dag_registry_current(reg, "ld");
	cr_assert_not_null(c);
	cr_assert_eq(c->version_id, r2.version_id);
	cr_assert_str_eq(c->dag->hash, s2->dags[0]->hash);
	ax_dag_entry_release(c);

	/* unknown version */
	cr_assert_eq(ax_dag_registry_load_version(reg, st, 999999), AX_ENOENT);
	cr_assert(strstr(ax_err_detail(), "999999") != NULL);

	ax_dag_registry_free(reg);
	ax_dagset_free(s1);
	ax_dagset_free(s2);
	ax_store_close(st);
	ax_test_pg_stop(pg);
}

/* --- lazy loading and the bound (a registry with a source) ----------------
 */

static ax_test_pg *lz_pg;
static ax_store   *lz_st;

static void
lz_setup(void)
{
	ax_log_init(AX_LOG_ERROR, 2);
	cr_assert_eq(ax_test_pg_start_migrated(&lz_pg), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(lz_pg), &lz_st), AX_OK);
}

static void
lz_teardown(void)
{
	ax_store_close(lz_st);
	ax_test_pg_stop(lz_pg);
}

TestSuite(registry_lazy, .init = lz_setup, .fini = lz_teardown,
          .timeout = 120);

/* Stores DAG name (tasks echo tag); returns the version id. */
static int64_t
lz_store(const char *name, const char *tag)
{
	ax_dag             *d;
	ax_dagset          *s = make_set(name, tag, &d);
	ax_dag_store_result r;
	cr_assert_eq(ax_dag_store_submit(lz_st, d, "t.yaml", &r), AX_OK, "%s",
	             ax_err_detail());
	ax_dagset_free(s);
	return r.version_id;
}

static ax_dag_registry *
lz_registry(size_t cache_max)
{
	ax_dag_registry *reg;
	cr_assert_eq(ax_dag_registry_new(&reg), AX_OK);
	cr_assert_eq(ax_dag_registry_set_source(reg, ax_test_pg_dsn(lz_pg)),
	             AX_OK);
	ax_dag_registry_set_cache_max(reg, cache_max);
	return reg;
}

Test(registry_lazy, a_miss_loads_the_active_version_once)
{
	ax_dag_registry_stats rs;
	int64_t               v   = lz_store("lz", "one");
	ax_dag_registry      *reg = lz_registry(10);

	ax_dag_entry *e = ax_dag_registry_current(reg, "lz");
	cr_assert_not_null(e, "%s", ax_err_detail());
	cr_assert_eq(e->version_id, v);
	cr_assert_str_eq(e->dag->tasks[0].eff.command, "echo one");
	cr_assert_eq(ax_dag_entry_task_index(e, "d"), 3);
	ax_dag_entry_release(e);
	/* cached: the second lookup is a hit, by name and by version */
	e = ax_dag_registry_current(reg, "lz");
	cr_assert_eq(e->version_id, v);
	ax_dag_entry_release(e);
	e = ax_dag_registry_version(reg, v);
	cr_assert_not_null(e);
	ax_dag_entry_release(e);
	ax_dag_registry_stats_get(reg, &rs);
	cr_assert_eq(rs.loads, 1);
	cr_assert_eq(rs.hits, 1);
	cr_assert_eq(rs.dags, 1);
	/* no such DAG: NULL, nothing cached */
	cr_assert_null(ax_dag_registry_current(reg, "nope"));
	ax_dag_registry_stats_get(reg, &rs);
	cr_assert_eq(rs.cached, 1);
	ax_dag_registry_free(reg);

	/* without a source a miss stays a miss */
	cr_assert_eq(ax_dag_registry_new(&reg), AX_OK);
	cr_assert_null(ax_dag_registry_current(reg, "lz"));
	ax_dag_registry_free(reg);
}

Test(registry_lazy, eviction_keeps_referenced_entries_valid)
{
	ax_dag_registry_stats rs;
	char                  name[16];
	int64_t               va = lz_store("held", "held");
	ax_dag_registry      *reg;

	for (int i = 0; i < 6; i++) {
		snprintf(name, sizeof(name), "e%d", i);
		lz_store(name, name);
	}
	reg             = lz_registry(2);
	ax_dag_entry *a = ax_dag_registry_current(reg, "held");
	cr_assert_not_null(a);
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < 6; i++) {
			snprintf(name, sizeof(name), "e%d", i);
			ax_dag_entry *e = ax_dag_registry_current(reg, name);
			cr_assert_not_null(e);
			cr_assert_str_eq(e->dag->name, name);
			ax_dag_entry_release(e);
		}
	ax_dag_registry_stats_get(reg, &rs);
	/* at most 2 unreferenced entries stay, plus the one we hold */
	cr_assert_leq(rs.cached, 3, "cached %zu", rs.cached);
	cr_assert_geq(rs.evictions, 10);
	cr_assert_geq(rs.loads, 12, "evicted entries were read again");
	/* the held entry was never freed under us */
	cr_assert_str_eq(a->dag->tasks[0].eff.command, "echo held");
	cr_assert_eq(ax_dag_entry_task_index(a, "d"), 3);
	ax_dag_entry *same = ax_dag_registry_version(reg, va);
	cr_assert_eq(same, a);
	ax_dag_entry_release(same);
	ax_dag_entry_release(a);
	/* released: the next insertions may evict it */
	for (int i = 0; i < 6; i++) {
		snprintf(name, sizeof(name), "e%d", i);
		ax_dag_entry_release(ax_dag_registry_current(reg, name));
	}
	ax_dag_registry_stats_get(reg, &rs);
	cr_assert_leq(rs.cached, 2, "cached %zu", rs.cached);
	cr_assert_eq(rs.entries, rs.cached, "an entry leaked");
	ax_dag_registry_free(reg);
}

Test(registry_lazy, paused_flag_of_an_uncached_dag)
{
	ax_dag_registry *reg;
	int64_t          vp = lz_store("p", "p");

	lz_store("q", "q");
	reg = lz_registry(0); /* nothing unreferenced stays cached */
	ax_dag_registry_set_paused(reg, "p", 1);
	cr_assert(ax_dag_registry_paused(reg, "p"));
	ax_dag_entry_release(ax_dag_registry_current(reg, "p"));
	/* the next insertion evicts p (unreferenced) */
	ax_dag_entry_release(ax_dag_registry_current(reg, "q"));
	cr_assert_null(ax_dag_registry_version(reg, vp), "p not evicted");
	cr_assert(ax_dag_registry_paused(reg, "p"),
	          "flag lost with the cache");
	cr_assert_not(ax_dag_registry_paused(reg, "q"));
	ax_dag_registry_set_paused(reg, "p", 0);
	cr_assert_not(ax_dag_registry_paused(reg, "p"));
	ax_dag_registry_free(reg);
}

Test(registry_lazy, version_change_while_the_old_entry_is_referenced)
{
	int64_t          v1  = lz_store("vc", "one");
	ax_dag_registry *reg = lz_registry(10);

	ax_dag_entry *old = ax_dag_registry_current(reg, "vc");
	cr_assert_eq(old->version_id, v1);
	int64_t v2 = lz_store("vc", "two");
	/* not notified yet: the cached version stays current */
	ax_dag_entry *e = ax_dag_registry_current(reg, "vc");
	cr_assert_eq(e, old);
	ax_dag_entry_release(e);
	ax_dag_registry_invalidate(reg, "vc");
	e = ax_dag_registry_current(reg, "vc");
	cr_assert_eq(e->version_id, v2);
	cr_assert_str_eq(e->dag->tasks[0].eff.command, "echo two");
	/* the old one is intact and still found by version */
	cr_assert_str_eq(old->dag->tasks[0].eff.command, "echo one");
	ax_dag_entry *byv = ax_dag_registry_version(reg, v1);
	cr_assert_eq(byv, old);
	ax_dag_entry_release(byv);
	ax_dag_entry_release(old);
	ax_dag_entry_release(e);
	/* invalidating everything: the next lookup reads PostgreSQL again */
	ax_dag_registry_stats rs0, rs1;
	ax_dag_registry_stats_get(reg, &rs0);
	ax_dag_registry_invalidate(reg, NULL);
	e = ax_dag_registry_current(reg, "vc");
	cr_assert_eq(e->version_id, v2);
	ax_dag_entry_release(e);
	ax_dag_registry_stats_get(reg, &rs1);
	cr_assert_eq(rs1.hits, rs0.hits, "served from the stale cache");
	cr_assert_eq(rs1.loads, rs0.loads, "v2 was alive: no second decode");
	ax_dag_registry_free(reg);
}

Test(registry_lazy, warm_decodes_the_dags_due_soon)
{
	ax_dag_registry *reg = lz_registry(10);
	size_t           n   = 0;
	char             name[16];

	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "w%d", i);
		lz_store(name, name);
	}
	/* w0..w2 due within minutes (w2 paused), w3 tomorrow */
	cr_assert_eq(
	    ax_store_exec(lz_st,
	                  "INSERT INTO schedules (dag_id, expression,"
	                  " next_fire_at) SELECT id, '0 * * * * ?', now() +"
	                  " CASE WHEN name = 'w3' THEN interval '1 day'"
	                  " ELSE interval '1 minute' END FROM dags",
	                  0, NULL),
	    AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_exec(lz_st,
	                           "UPDATE dags SET paused = true"
	                           " WHERE name = 'w2'",
	                           0, NULL),
	             AX_OK);
	cr_assert_eq(
	    ax_dag_registry_warm(reg, 100, 10 * 60 * AX_USEC_PER_SEC, &n),
	    AX_OK, "%s", ax_err_detail());
	cr_assert_eq(n, 2);
	size_t ndags;
	ax_dag_registry_counts(reg, &ndags, NULL);
	cr_assert_eq(ndags, 2);

	ax_dag_registry_free(reg);

	/* bounded by max, and by the cache bound */
	reg = lz_registry(1);
	cr_assert_eq(
	    ax_dag_registry_warm(reg, 100, 10 * 60 * AX_USEC_PER_SEC, &n),
	    AX_OK);
	cr_assert_eq(n, 1);
	ax_dag_registry_free(reg);
	cr_assert_eq(ax_dag_registry_new(&reg), AX_OK);
	cr_assert_eq(ax_dag_registry_warm(reg, 100, 1, &n), AX_ESTATE);
	ax_dag_registry_free(reg);
}
