/*
 * test_dag_registry.c - the shared registry of DAG versions: publish makes
 * a version current, a reference keeps a superseded version alive until
 * released, paused flags, O(1) task lookup, concurrent readers during
 * publishes, and loading a stored version back from PostgreSQL (hash
 * equal to the stored content hash).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dag.h"
#include "dag_registry.h"
#include "dag_store.h"
#include "dag_validate.h"
#include "dag_yaml.h"
#include "log.h"
#include "migrate.h"
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
	int                 applied;
	char                h1[AX_SHA256_HEX_LEN];

	ax_log_init(AX_LOG_ERROR, 2);
	cr_assert_eq(ax_test_pg_start(&pg), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_migrate_run(ax_test_pg_dsn(pg), &applied), AX_OK);
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
