/*
 * api_client.h - the HTTP client side of ax-api for axctl (libcurl +
 * jansson).
 *
 * Role: every `axctl dag|run|instance|worker|events` subcommand that talks
 * to a running ax-api goes through this module: where the server is
 * (--server, else AX_SERVER, else http://127.0.0.1:8080), which bearer
 * token to send (--token-file, else AX_TOKEN, else $AX_HOME/admin.token
 * when it exists; AX_HOME defaults to ./.ax like the `home` config key),
 * and how failures read: an unreachable server is "cannot reach ax-api at
 * URL: is it running?", an HTTP error is the server's
 * {"error": CODE, "detail": TEXT} as "CODE: TEXT".
 *
 * Invariants: one client per process, used from one thread; the server's
 * JSON is handed to callers untouched (axctl --json prints it as is).
 *
 * Workload: a handful of requests per command; `--follow` modes poll once
 * a second or hold one streaming request.
 */
#ifndef AX_API_CLIENT_H
#define AX_API_CLIENT_H

#include <jansson.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>

#include "ax_err.h"

#define AX_API_DEFAULT_SERVER "http://127.0.0.1:8080"

/* Options every API subcommand accepts (strings borrowed from argv). */
typedef struct ax_api_opts {
	const char *server;     /* --server URL; NULL: AX_SERVER or default */
	const char *token_file; /* --token-file FILE; NULL: AX_TOKEN, ... */
	int         json;       /* --json: print the server's JSON */
} ax_api_opts;

/* Help text of the options above and of the exit status, for --help. */
#define AX_API_OPTS_HELP                                                      \
	"  --server URL       ax-api base URL (default: $AX_SERVER, else\n"   \
	"                     " AX_API_DEFAULT_SERVER ")\n"                   \
	"  --token-file FILE  bearer token file (default: $AX_TOKEN, else\n"  \
	"                     $AX_HOME/admin.token; AX_HOME=./.ax)\n"         \
	"  --json             print the server's JSON instead of a table\n"   \
	"\n"                                                                  \
	"Exit status: 0 success; 1 failure (server unreachable, bad token,\n" \
	"not found, refused by the server); 2 usage error.\n"

/*
 * Consumes the common option at argv[*i] (--server URL, --token-file
 * FILE, --json, also as --opt=VALUE) into o and advances *i. Returns 1
 * when consumed, 0 when argv[*i] is not one of them, -1 after printing a
 * usage error (missing value) prefixed with prog.
 */
int ax_api_opts_parse(int argc, char **argv, int *i, ax_api_opts *o,
                      const char *prog);

typedef struct ax_api_client ax_api_client;

/*
 * Creates a client from o (NULL: defaults). Fails with AX_EIO when an
 * explicit --token-file cannot be read, AX_EINVAL for a URL that is not
 * http:// or https://. The caller owns *out (ax_api_client_free).
 */
ax_err ax_api_client_new(const ax_api_opts *o, ax_api_client **out);

/* Frees c; accepts NULL. */
void ax_api_client_free(ax_api_client *c);

/*
 * Sends `Idempotency-Key: key` with every later POST of c (key copied;
 * NULL stops it): a repeat of the same request with the same key gets
 * the server's first answer and has no second effect.
 */
ax_err ax_api_client_set_idempotency_key(ax_api_client *c, const char *key);

/*
 * Makes every later request of c end within about a second once *flag
 * is nonzero (a signal handler's flag; NULL: never), failing with
 * AX_ECLOSED ("interrupted"), whatever the server does meanwhile: a
 * command that handles SIGINT itself stays interruptible while it waits
 * for an answer.
 */
void ax_api_client_set_abort(ax_api_client               *c,
                             const volatile sig_atomic_t *flag);

/* The base URL in use (no trailing slash). Owned by c. */
const char *ax_api_client_url(const ax_api_client *c);

/* One answer. Owned by the caller: ax_api_reply_fini. */
typedef struct ax_api_reply {
	long    status; /* HTTP status; 0 when no answer came */
	char   *body;   /* NUL-terminated body (NULL when streamed) */
	size_t  len;
	json_t *json; /* body parsed as JSON, NULL when it is not JSON */
} ax_api_reply;

/* Frees what rep holds; safe on a zeroed reply. */
void ax_api_reply_fini(ax_api_reply *rep);

/*
 * Sends method path (starting with '/', query included; NULL fails with
 * AX_ELIMIT, see ax_api_path_str) with body (NULL:
 * none) of content type ctype. Fills rep (zeroed by the caller) and
 * returns AX_OK for a 2xx answer. Otherwise the detail is the message
 * for the user and the code: AX_EIO when the server cannot be reached,
 * AX_EPERM for 401/403, AX_ENOENT for 404, AX_ESTATE for 409, AX_EINVAL
 * for other 4xx, AX_EDB for 5xx; rep keeps the error body (for 422 its
 * "errors" list). When out is not NULL, a 2xx body is written to out as
 * it arrives instead of into rep (streaming, no overall timeout).
 */
ax_err ax_api_client_call(ax_api_client *c, const char *method,
                          const char *path, const char *ctype,
                          const char *body, size_t len, FILE *out,
                          ax_api_reply *rep);

/*
 * GET path; on AX_OK *out is the answer's JSON (new reference).
 */
ax_err ax_api_client_get(ax_api_client *c, const char *path, json_t **out);

/*
 * POST path with body (borrowed; NULL sends no body); on AX_OK *out is
 * the answer's JSON (new reference; an empty JSON object when the body
 * is empty).
 */
ax_err ax_api_client_post(ax_api_client *c, const char *path, json_t *body,
                          json_t **out);

/* As ax_api_client_post with another method (PUT, DELETE). */
ax_err ax_api_client_json(ax_api_client *c, const char *method,
                          const char *path, json_t *body, json_t **out);

/* A request path under construction, percent-encoding what it appends. */
typedef struct ax_api_path {
	char   buf[2048];
	size_t len;
	int    nq;       /* query arguments so far */
	int    overflow; /* too long: ax_api_path_str gives NULL */
} ax_api_path;

/* The path, or NULL when it overflowed (the client calls then fail with
 * AX_ELIMIT). Owned by p. */
const char *ax_api_path_str(const ax_api_path *p);

/* Starts p with the literal text lit (e.g. "/api/v1/dags/"). */
void ax_api_path_init(ax_api_path *p, const char *lit);

/* Appends lit unchanged. */
void ax_api_path_lit(ax_api_path *p, const char *lit);

/* Appends one path segment, percent-encoded. */
void ax_api_path_seg(ax_api_path *p, const char *seg);

/* Appends ?key=value / &key=value (encoded); nothing when value is NULL. */
void ax_api_path_query(ax_api_path *p, const char *key, const char *value);

/*
 * Prints "prog: DETAIL" (the detail of the last failed call) to stderr
 * and returns 1, the failure exit status.
 */
int ax_api_fail(const char *prog);

#endif /* AX_API_CLIENT_H */
