/*
 * e2e_harness.h - end-to-end tests with the real binaries: a throwaway
 * home with its own PostgreSQL (tests/pg_harness.h), migrated, DAGs
 * loaded from YAML strings, axd, N ax-worker processes and ax-api
 * (cli/stack.h), SQL helpers that wait for a condition with a deadline,
 * kill -9 and restart of a process, and the daemons' logs printed when a
 * wait fails.
 *
 * Binaries: $AX_BIN_DIR (set by tests/meson.build to the build root,
 * with depends on axd, ax-worker and axctl).
 *
 * Every function fails the current criterion test (cr_assert) on error,
 * after printing the end of every daemon log; none returns an error.
 * Polling PostgreSQL is fine here: this is a test watching the system,
 * not the system finding work.
 */
#ifndef AX_E2E_HARNESS_H
#define AX_E2E_HARNESS_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "api_token.h"

#include "pg_harness.h"
#include "stack.h"

typedef struct ax_e2e {
	ax_test_pg *pg;
	ax_stack    st;
	PGconn     *db;                  /* the test's own connection */
	char        dags[PATH_MAX + 16]; /* $home/dags */
} ax_e2e;

/*
 * A fresh home with a migrated database and the daemons' config (workers
 * ax-worker processes, none started yet). extra_yaml: top-level keys
 * appended to ax.yaml (keys other than home, log, database, queue,
 * worker, events, api; set worker.* through AX_WORKER_* in the
 * environment instead, which the children inherit); may be NULL.
 */
ax_e2e *ax_e2e_new(int workers, const char *extra_yaml);

/*
 * The same with worker.run_as set to run_as (NULL: not written, the
 * worker's default, ax-task). ax_e2e_new runs tasks as root: the tests'
 * tasks write their marks into the home, which is root's.
 */
ax_e2e *ax_e2e_new_as(int workers, const char *extra_yaml, const char *run_as);

/* Stops the daemons and PostgreSQL and removes the home. Accepts NULL. */
void ax_e2e_free(ax_e2e *e);

/* Writes yaml to $home/dags/<file>.yaml and loads the whole folder (as
 * `axctl dag load`); then NOTIFYs dag_changed for dag (may be NULL) so a
 * running axd picks it up. */
void ax_e2e_load(ax_e2e *e, const char *file, const char *dag,
                 const char *yaml);

/* Starts axd and waits until it holds the scheduler lease (60 s). */
void ax_e2e_start_axd(ax_e2e *e);

/* Starts every worker. */
void ax_e2e_start_workers(ax_e2e *e);

/*
 * Starts ax-api on a free 127.0.0.1 port (AX_API_PORT is set in this
 * process's environment, which the child inherits; so are AX_API_TLS_*
 * when the caller set them) and waits until the port accepts TCP
 * connections (10 s). Returns the port.
 */
int ax_e2e_start_api(ax_e2e *e);

/*
 * Starts ax-api (ax_e2e_start_api) and creates an API token of role
 * (AX_API_ROLE_*) named name; url (at least 64 bytes) gets
 * "http://127.0.0.1:PORT" and token the secret. AX_SERVER and AX_TOKEN
 * are set in the environment, so axctl (AX_CLI_AXCTL) talks to it.
 */
void ax_e2e_start_api_token(ax_e2e *e, ax_api_role role, const char *name,
                            char *url, size_t urlcap,
                            char token[AX_API_TOKEN_LEN]);

/* An HTTP answer: status, the body (truncated to its capacity) and the
 * body parsed as JSON (NULL when it is not; json_decref it). */
typedef struct ax_e2e_answer {
	long    status;
	json_t *js;
	size_t  len;
	char    body[65536];
} ax_e2e_answer;

/*
 * Sends method url+path with "Authorization: Bearer token" (token may be
 * NULL: no header), a JSON body of len bytes (body NULL: none; a POST
 * then sends an empty one) and an Idempotency-Key (key may be NULL), 20 s
 * at most. The answer goes to *a. Fails the test when no HTTP answer
 * comes back (connection refused, timeout).
 */
void ax_e2e_http(const char *url, const char *token, const char *method,
                 const char *path, const char *body, size_t len,
                 const char *key, ax_e2e_answer *a);

/* Triggers a manual run of dag through the API (POST
 * /api/v1/dags/{dag}/trigger); fails the test unless it is accepted. */
void ax_e2e_trigger(const char *url, const char *token, const char *dag);

/* Points $AXCTL (used by AX_CLI_AXCTL) at $AX_BIN_DIR/axctl; fails the
 * test when AX_BIN_DIR is not set. */
void ax_e2e_use_axctl(void);

/* Sends sig (e.g. SIGKILL) to axd / worker i, and reaps it. */
void ax_e2e_kill_axd(ax_e2e *e, int sig);
void ax_e2e_kill_worker(ax_e2e *e, int i, int sig);

/* The first column of the first row of a query, as an integer (NULL or
 * no row: -1). */
int64_t ax_e2e_int(ax_e2e *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The same as text into buf ("" for NULL / no row). */
char *ax_e2e_text(ax_e2e *e, char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/*
 * Polls the query every 100 ms until its first value is true / non-zero,
 * up to timeout_s; a daemon that dies meanwhile, or the deadline, fails
 * the test with what (a description) and the logs.
 */
void ax_e2e_wait(ax_e2e *e, double timeout_s, const char *what,
                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Prints the end of every daemon log and the instance table to stderr. */
void ax_e2e_dump(ax_e2e *e);

/*
 * A fresh directory /tmp/<prefix>-XXXXXX, writable by every user (the
 * tasks' marks: a task user other than root writes there too), into dir
 * (at least 64 bytes); marks_free removes it and everything in it.
 */
void ax_e2e_marks_new(char *dir, size_t len, const char *prefix);
void ax_e2e_marks_free(const char *dir);

/* Current UTC time + secs as ISO 8601 "YYYY-MM-DDTHH:MM:SSZ" (for a
 * one-shot `schedule: {at: ...}`), whole seconds rounded up. */
char *ax_e2e_at(double secs, char *buf, size_t len);

#endif /* AX_E2E_HARNESS_H */
