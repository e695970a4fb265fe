/*
 * store_fixture.c - see store_fixture.h.
 */
#include "store_fixture.h"

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dag.h"
#include "dag_validate.h"
#include "dag_yaml.h"
#include "log.h"

void
ax_test_store_db(ax_test_pg **pg, ax_store **st)
{
	cr_assert_eq(ax_test_pg_start_migrated(pg), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(*pg), st), AX_OK, "%s",
	             ax_err_detail());
}

void
ax_test_store_db_stop(ax_test_pg *pg, ax_store *st)
{
	ax_store_close(st);
	ax_test_pg_stop(pg);
}

void
ax_test_pipeline_db(ax_test_pg **pg, ax_store **st, ax_config **cfg,
                    ax_pipeline_ctx *ctx)
{
	ax_log_init(AX_LOG_WARN, 2);
	ax_test_store_db(pg, st);
	cr_assert_eq(ax_config_load(NULL, cfg), AX_OK);
	ctx->cfg = *cfg;
	ctx->dsn = ax_test_pg_dsn(*pg);
}

void
ax_test_send(ax_actor_system *sys, const char *dest, Ax__Command *cmd)
{
	ax_actor_client *cl;
	size_t           len = ax__command__get_packed_size(cmd);
	uint8_t         *buf = malloc(len + 1);
	ax_actor_item    it  = { .type = AX_ITEM_COMMAND,
		                 .len  = (uint32_t) len,
		                 .data = buf };

	cr_assert_not_null(buf);
	ax__command__pack(cmd, buf);
	cr_assert_eq(ax_actor_client_new(sys, "test", &cl), AX_OK);
	cr_assert_eq(ax_actor_client_send(cl, dest, &it, 1, 0), AX_OK);
	ax_actor_client_free(cl);
	free(buf);
}

ax_dag_store_result
ax_test_store_dag(ax_store *st, const char *yaml)
{
	ax_dagset          *set;
	ax_dag_store_result r;

	cr_assert_eq(ax_dagset_new(NULL, &set), AX_OK);
	ax_dag_yaml_load_buf(set, "t.yaml", yaml, strlen(yaml));
	ax_dagset_validate(set);
	if (ax_dagset_error_count(set, NULL) > 0)
		ax_dagset_print_diags(set, stderr);
	cr_assert_eq(ax_dagset_error_count(set, NULL), 0);
	cr_assert_eq(ax_dag_store_submit(st, set->dags[0], "t.yaml", &r),
	             AX_OK, "%s", ax_err_detail());
	ax_dagset_free(set);
	return r;
}

int64_t
ax_test_q_intv(ax_store *st, const char *fmt, va_list ap)
{
	char    sql[4096];
	int64_t v = -1;

	vsnprintf(sql, sizeof(sql), fmt, ap);
	cr_assert_eq(ax_store_query_int64(st, sql, 0, NULL, &v), AX_OK,
	             "%s: %s", sql, ax_err_detail());
	return v;
}

int
ax_test_plans(ax_store *st, const char *name, int64_t *generic,
              int64_t *custom)
{
	const char *p[1] = { name };
	PGresult   *r    = NULL;
	int         has;

	cr_assert_eq(ax_store_query(st,
	                            "SELECT generic_plans, custom_plans FROM "
	                            "pg_prepared_statements WHERE name = $1",
	                            1, p, &r),
	             AX_OK, "%s", ax_err_detail());
	has      = PQntuples(r) == 1;
	*generic = has ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : 0;
	*custom  = has ? strtoll(PQgetvalue(r, 0, 1), NULL, 10) : 0;
	PQclear(r);
	return has;
}

int64_t
ax_test_q_int(ax_store *st, const char *fmt, ...)
{
	int64_t v;
	va_list ap;

	va_start(ap, fmt);
	v = ax_test_q_intv(st, fmt, ap);
	va_end(ap);
	return v;
}
