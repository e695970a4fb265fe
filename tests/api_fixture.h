/*
 * api_fixture.h - an ax-api server for tests: a throwaway PostgreSQL
 * (pg_harness.h), migrated, with one token per role, and the server
 * (api-server/api_server.h) running in-process on a free port.
 *
 * Role: shared by the tests that talk to ax-api over real HTTP (the e2e
 * test of axctl drives the real axctl binary against it). Link
 * tests/meson.build's `api_fixture_src` (it includes the pg harness).
 *
 * Every function fails the current criterion test on error.
 */
#ifndef AX_TEST_API_FIXTURE_H
#define AX_TEST_API_FIXTURE_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdint.h>

#include "api_server.h"
#include "api_token.h"
#include "pg_harness.h"
#include "store.h"

typedef struct ax_api_fixture {
	ax_test_pg    *pg;
	ax_store      *st;
	ax_api_server *srv;
	PGconn        *listener; /* LISTENs on ax_control */
	char           url[64];  /* http://127.0.0.1:PORT */
	char           admin[AX_API_TOKEN_LEN];
	char           oper[AX_API_TOKEN_LEN];
	char           viewer[AX_API_TOKEN_LEN];
} ax_api_fixture;

/* Starts everything; max_body 0 is the server's default. */
void ax_api_fixture_start(ax_api_fixture *f, size_t max_body);

/* Starts everything with the server options o (its dsn is the
 * fixture's). */
void ax_api_fixture_start_with(ax_api_fixture *f, const ax_api_options *o);

/* Stops the server and the cluster; safe on a zeroed fixture. */
void ax_api_fixture_stop(ax_api_fixture *f);

/* Runs one SQL statement on the fixture's database. */
void ax_api_fixture_sql(ax_api_fixture *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The first column of the first row as an integer. */
int64_t ax_api_fixture_int(ax_api_fixture *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The next ax_control notification payload within 3 s as JSON (NULL:
 * none); a new reference. */
json_t *ax_api_fixture_notify(ax_api_fixture *f);

/* Drops pending notifications. */
void ax_api_fixture_drain(ax_api_fixture *f);

/* One answer of ax_api_fixture_req. */
typedef struct ax_api_fixture_ans {
	long    status;
	char   *raw;  /* the body, NUL-terminated (malloc'd) */
	json_t *json; /* the body parsed, NULL when not JSON */
} ax_api_fixture_ans;

/*
 * Sends method path with bearer token (NULL: none) and body (NULL: none)
 * over HTTP and fills *a (ax_api_fixture_ans_fini frees the previous
 * contents first). Returns the status.
 */
long ax_api_fixture_req(ax_api_fixture *f, const char *method,
                        const char *path, const char *token, const char *body,
                        ax_api_fixture_ans *a);

/* Frees what a holds and zeroes it; safe on a zeroed answer. */
void ax_api_fixture_ans_fini(ax_api_fixture_ans *a);

#endif /* AX_TEST_API_FIXTURE_H */
