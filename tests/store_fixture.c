/*
 * store_fixture.c - see store_fixture.h.
 */
#include "store_fixture.h"

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dag.h"
#include "dag_validate.h"
#include "dag_yaml.h"

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
