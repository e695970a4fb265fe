/*
 * dag_store.c - submit DAG / template versions (see dag_store.h).
 *
 * Both kinds share one routine parameterised by table names; the SQL is
 * built from constant fragments only (no user text), user values always
 * travel as parameters.
 */
#include "dag_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct kind_tables {
	const char *head; /* dags | task_templates */
	const char *ver;  /* dag_versions | task_template_versions */
	const char *fk;   /* dag_id | template_id */
	const char *what; /* for messages */
} kind_tables;

static const kind_tables dag_tables = { "dags", "dag_versions", "dag_id",
	                                "DAG" };
static const kind_tables tpl_tables = { "task_templates",
	                                "task_template_versions",
	                                "template_id", "task template" };

typedef struct submit {
	const kind_tables   *k;
	const char          *name;
	const char          *hash;
	const char          *yaml;
	const char          *json;
	const char          *source;
	ax_dag_store_result *res;
} submit;

const char *
ax_dag_store_outcome_name(ax_dag_store_outcome o)
{
	switch (o) {
	case AX_DAG_CREATED:
		return "created";
	case AX_DAG_UNCHANGED:
		return "unchanged";
	case AX_DAG_UPDATED:
		return "updated";
	}
	return "?";
}

/*
 * Runs sql (built from this kind's table names) as the store's prepared
 * statement ax_ds.<head>.<tag>: a load of thousands of DAGs plans each
 * statement once per connection, not once per DAG (planning took about
 * as long as running them).
 */
static ax_err
ds_query(ax_store *s, const submit *sub, const char *tag, const char *sql,
         int nparams, const char *const *params, PGresult **res)
{
	char   name[64];
	ax_err rv;

	snprintf(name, sizeof(name), "ax_ds.%s.%s", sub->k->head, tag);
	if ((rv = ax_store_prepare_once(s, name, sql, nparams)) != AX_OK)
		return rv;
	return ax_store_query_prepared(s, name, nparams, params, res);
}

static ax_err
submit_tx(ax_store *s, void *arg)
{
	submit     *sub = arg;
	char        sql[512], idbuf[32], vbuf[32];
	PGresult   *r = NULL;
	ax_err      rv;
	int         created = 0;
	int64_t     id, active, vid;
	const char *p[6];

	/* the head row, created on first submission and locked */
	snprintf(sql, sizeof(sql),
	         "INSERT INTO %s (name) VALUES ($1) ON CONFLICT (name) DO "
	         "NOTHING RETURNING id",
	         sub->k->head);
	p[0] = sub->name;
	if ((rv = ds_query(s, sub, "head", sql, 1, p, &r)) != AX_OK)
		return rv;
	created = PQntuples(r) == 1;
	PQclear(r);
	snprintf(sql, sizeof(sql),
	         "SELECT id, active_version_id FROM %s WHERE name = $1 FOR "
	         "UPDATE",
	         sub->k->head);
	if ((rv = ds_query(s, sub, "lock", sql, 1, p, &r)) != AX_OK)
		return rv;
	if (PQntuples(r) != 1) {
		PQclear(r);
		return ax_err_set(AX_EINTERNAL, "%s '%s' vanished",
		                  sub->k->what, sub->name);
	}
	id     = ax_store_cell_i64(r, 0, 0);
	active = ax_store_cell_i64(r, 0, 1);
	PQclear(r);
	snprintf(idbuf, sizeof(idbuf), "%lld", (long long) id);

	/* a version with this content already? */
	snprintf(sql, sizeof(sql),
	         "SELECT id, version FROM %s WHERE %s = $1 AND content_hash = "
	         "$2",
	         sub->k->ver, sub->k->fk);
	p[0] = idbuf;
	p[1] = sub->hash;
	if ((rv = ds_query(s, sub, "same", sql, 2, p, &r)) != AX_OK)
		return rv;
	if (PQntuples(r) == 1) {
		vid                  = ax_store_cell_i64(r, 0, 0);
		sub->res->version    = (int) ax_store_cell_i64(r, 0, 1);
		sub->res->id         = id;
		sub->res->version_id = vid;
		PQclear(r);
		if (vid == active) {
			sub->res->outcome = AX_DAG_UNCHANGED;
			return AX_OK;
		}
	} else {
		PQclear(r);
		snprintf(
		    sql, sizeof(sql),
		    "INSERT INTO %s (%s, version, content_hash, yaml, "
		    "definition, source) SELECT $1, coalesce(max(version), "
		    "0) + 1, $2, $3, $4::jsonb, $5 FROM %s WHERE %s = $1 "
		    "RETURNING id, version",
		    sub->k->ver, sub->k->fk, sub->k->ver, sub->k->fk);
		p[2] = sub->yaml;
		p[3] = sub->json;
		p[4] = sub->source;
		if ((rv = ds_query(s, sub, "version", sql, 5, p, &r)) != AX_OK)
			return rv;
		vid                  = ax_store_cell_i64(r, 0, 0);
		sub->res->version    = (int) ax_store_cell_i64(r, 0, 1);
		sub->res->id         = id;
		sub->res->version_id = vid;
		PQclear(r);
	}
	snprintf(sql, sizeof(sql),
	         "UPDATE %s SET active_version_id = $2, updated_at = now() "
	         "WHERE id = $1",
	         sub->k->head);
	snprintf(vbuf, sizeof(vbuf), "%lld", (long long) vid);
	p[0] = idbuf;
	p[1] = vbuf;
	if ((rv = ds_query(s, sub, "activate", sql, 2, p, NULL)) != AX_OK)
		return rv;
	sub->res->outcome = created ? AX_DAG_CREATED : AX_DAG_UPDATED;
	return AX_OK;
}

static ax_err
run_submit(ax_store *s, submit *sub)
{
	ax_err rv = ax_store_tx(s, submit_tx, sub);
	if (rv != AX_OK) {
		char d[768];
		snprintf(d, sizeof(d), "%s", ax_err_detail());
		return ax_err_set(rv, "storing %s '%s': %s", sub->k->what,
		                  sub->name, d);
	}
	return AX_OK;
}

ax_err
ax_dag_store_submit(ax_store *s, const ax_dag *dag, const char *source,
                    ax_dag_store_result *res)
{
	submit sub = { &dag_tables, dag->name, dag->hash, dag->yaml,
		       NULL,        source,    res };
	ax_err rv;

	if (!dag->valid || dag->name == NULL || dag->hash[0] == '\0')
		return ax_err_set(AX_EINVAL,
		                  "DAG '%s' is not valid; validate it first",
		                  dag->name ? dag->name : "?");
	json_t *j = ax_dag_to_json(dag);
	if (j == NULL ||
	    (sub.json = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS)) ==
	        NULL) {
		json_decref(j);
		return ax_err_set(AX_ENOMEM, "DAG '%s' as JSON", dag->name);
	}
	json_decref(j);
	memset(res, 0, sizeof(*res));
	rv = run_submit(s, &sub);
	free((char *) sub.json);
	return rv;
}

ax_err
ax_dag_store_submit_template(ax_store *s, const ax_task_template *t,
                             const char *source, ax_dag_store_result *res)
{
	submit sub = { &tpl_tables, t->name, t->hash, t->yaml,
		       NULL,        source,  res };
	ax_err rv;

	if (!t->valid || t->name == NULL || t->hash[0] == '\0')
		return ax_err_set(
		    AX_EINVAL,
		    "task template '%s' is not valid; validate it "
		    "first",
		    t->name ? t->name : "?");
	json_t *j = ax_template_to_json(t);
	if (j == NULL ||
	    (sub.json = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS)) ==
	        NULL) {
		json_decref(j);
		return ax_err_set(AX_ENOMEM, "template '%s' as JSON", t->name);
	}
	json_decref(j);
	memset(res, 0, sizeof(*res));
	rv = run_submit(s, &sub);
	free((char *) sub.json);
	return rv;
}
