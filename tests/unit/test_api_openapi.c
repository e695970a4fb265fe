/*
 * test_api_openapi.c - api-server/openapi.yaml and the route table of
 * ax-api (api_routes.h) describe the same API: every path + method in
 * the file is served, every served route is in the file, and the least
 * role the file states (x-ax-role) is the one the server enforces.
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "api_routes.h"
#include "ax_config.h"

typedef struct op {
	char path[128];
	char method[8];
	char role[16];
} op;

static op     ops[128];
static size_t nops;

static yaml_node_t *
map_get(yaml_document_t *doc, yaml_node_t *map, const char *key)
{
	if (map == NULL || map->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
	     p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(doc, p->key);
		if (k->type == YAML_SCALAR_NODE &&
		    strcmp((char *) k->data.scalar.value, key) == 0)
			return yaml_document_get_node(doc, p->value);
	}
	return NULL;
}

static void
load(void)
{
	static const char *const methods[] = { "get",    "post",  "put",
		                               "delete", "patch", NULL };
	yaml_parser_t            parser;
	yaml_document_t          doc;
	FILE *f = fopen(AX_SOURCE_ROOT "/api-server/openapi.yaml", "rb");

	cr_assert_not_null(f, "api-server/openapi.yaml is missing");
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_file(&parser, f);
	cr_assert(yaml_parser_load(&parser, &doc), "openapi.yaml: %s",
	          parser.problem);
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	cr_assert_not_null(map_get(&doc, root, "openapi"));
	yaml_node_t *paths = map_get(&doc, root, "paths");
	cr_assert_not_null(paths, "no paths");
	nops = 0;
	for (yaml_node_pair_t *p = paths->data.mapping.pairs.start;
	     p < paths->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(&doc, p->key);
		yaml_node_t *v = yaml_document_get_node(&doc, p->value);
		for (const char *const *m = methods; *m; m++) {
			yaml_node_t *o = map_get(&doc, v, *m), *role;
			if (o == NULL)
				continue;
			cr_assert_lt(nops, 128);
			op *x = &ops[nops++];
			snprintf(x->path, sizeof(x->path), "%s",
			         (char *) k->data.scalar.value);
			for (size_t i = 0; i < strlen(*m) + 1; i++)
				x->method[i] = (char) toupper((*m)[i]);
			role = map_get(&doc, o, "x-ax-role");
			cr_assert_not_null(role, "%s %s: no x-ax-role",
			                   x->method, x->path);
			snprintf(x->role, sizeof(x->role), "%s",
			         (char *) role->data.scalar.value);
		}
	}
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	fclose(f);
}

TestSuite(api_openapi, .init = load, .timeout = 30);

Test(api_openapi, every_documented_operation_is_served)
{
	cr_assert_gt(nops, 20);
	for (size_t i = 0; i < nops; i++) {
		int found = 0;
		for (size_t r = 0; r < ax_api_routes_count; r++)
			if (!strcmp(ax_api_routes[r].pattern, ops[i].path) &&
			    !strcmp(ax_api_routes[r].method, ops[i].method))
				found = 1;
		cr_expect(found, "%s %s is documented but not served",
		          ops[i].method, ops[i].path);
	}
}

Test(api_openapi, every_served_route_is_documented_with_its_role)
{
	for (size_t r = 0; r < ax_api_routes_count; r++) {
		const ax_api_route *rt    = &ax_api_routes[r];
		const op           *found = NULL;
		for (size_t i = 0; i < nops; i++)
			if (!strcmp(rt->pattern, ops[i].path) &&
			    !strcmp(rt->method, ops[i].method))
				found = &ops[i];
		cr_expect_not_null(found,
		                   "%s %s is served but not in "
		                   "openapi.yaml",
		                   rt->method, rt->pattern);
		if (found != NULL)
			cr_expect_str_eq(
			    found->role, ax_api_role_name(rt->min_role),
			    "%s %s: role", rt->method, rt->pattern);
	}
}

Test(api_openapi, matcher_prefers_literals_and_reports_allowed_methods)
{
	ax_api_match m;

	int r = ax_api_route_match("GET", "/api/v1/dags/x.y/versions", &m);
	cr_assert_geq(r, 0);
	cr_expect_str_eq(ax_api_routes[r].pattern,
	                 "/api/v1/dags/{name}/versions");
	cr_expect_str_eq(m.params[0], "x.y");
	cr_expect_eq(ax_api_route_match("GET", "/api/v1/dags/x/pause", &m),
	             -1);
	cr_expect(m.path_found);
	cr_expect_str_eq(m.allow, "POST");
	cr_expect_eq(ax_api_route_match("GET", "/api/v1/nope", &m), -1);
	cr_expect_not(m.path_found);
	cr_expect_eq(ax_api_route_match("GET", "/api/v1/dags/", &m), -1);
	cr_expect_eq(ax_api_route_match("GET", "/api/v1/dags//versions", &m),
	             -1);
}
