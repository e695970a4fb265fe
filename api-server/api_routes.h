/*
 * api_routes.h - the route table of ax-api: method, path pattern with
 * {params}, handler, least role. One const array, so the OpenAPI test
 * (tests/unit/test_api_openapi.c) can compare it with api-server/
 * openapi.yaml and a reader finds every endpoint in one place.
 *
 * Invariants: patterns are absolute, segments are literal or a whole
 * {param}; at most AX_API_MAX_PARAMS params; no two rows share method
 * and pattern. Matching prefers literal segments over params. A param
 * named {id} must be an id and {name} a DAG name (api_http.h
 * ax_api_check_path_params); the server answers 400 before the handler
 * otherwise. What request body a route takes is ax_api_route_body().
 */
#ifndef AX_API_ROUTES_H
#define AX_API_ROUTES_H

#include <stddef.h>

#include "api_http.h"

typedef struct ax_api_route {
	const char    *method;  /* "GET", "POST" */
	const char    *pattern; /* "/api/v1/dags/{name}" */
	ax_api_handler handler;
	ax_api_role    min_role; /* AX_API_ROLE_NONE: no token needed */
	const char    *summary;
} ax_api_route;

extern const ax_api_route ax_api_routes[];
extern const size_t       ax_api_routes_count;

/*
 * The request body route r takes: none for GET and DELETE, a JSON object
 * for other methods, unless a row of the body table in api_routes.c says
 * otherwise (DAG YAML; {} only for routes without fields).
 */
ax_api_body ax_api_route_body(const ax_api_route *r);

/* Outcome of ax_api_route_match. */
typedef struct ax_api_match {
	int route;             /* index into ax_api_routes, or -1 */
	int path_found;        /* some route has this path (405 when
	                          route is -1) */
	char        allow[64]; /* methods served on the path: "GET, POST" */
	const char *params[AX_API_MAX_PARAMS]; /* into buf */
	char        buf[1024];
} ax_api_match;

/*
 * Finds the route for method and path (a decoded path without query).
 * Fills m; returns m->route. A path over the buffer matches nothing.
 */
int ax_api_route_match(const char *method, const char *path, ax_api_match *m);

#endif /* AX_API_ROUTES_H */
