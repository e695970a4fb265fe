/*
 * test_api_abuse.c - ax-api under abuse, over raw sockets (so requests
 * curl would refuse to send can be sent) against an in-process server
 * on a real PostgreSQL (tests/api_fixture.h).
 *
 * - 1,000 idle and 1,000 slowloris connections (a header line a second)
 *   held open: a normal client is still served, each request within 3 s,
 *   and the slow connections are still open afterwards (held, not shed).
 * - The head deadline: a slowloris connection gets a JSON 408 and is
 *   closed, an idle one is closed, both within the deadline and a tick.
 * - The per-client limit: connection 65 from one address is closed.
 * - Every refusal is a JSON error: NUL (%00), spaces and non-digits in
 *   ids, bad DAG names, oversized heads (431), bodies over the limit
 *   with and without a length (413, 20 MB chunked included), a body on a
 *   route that takes none and malformed JSON on kill / pause / unpause.
 *
 * Every client here comes from 127.0.0.1, so the hold test runs with no
 * per-client limit (as behind a proxy) and the limit test with the
 * default of 64.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api_fixture.h"
#include "clock.h"
#include "log.h"

#define N_IDLE 1000
#define N_SLOW 1000

static ax_api_fixture fx;

/* The last answer of exchange(). */
static int     status;
static char   *answer;
static size_t  answer_len;
static json_t *js;

static void
raise_nofile(void)
{
	struct rlimit rl;
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < 8192 && rl.rlim_max >= 8192) {
		rl.rlim_cur = 8192;
		cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	}
	cr_assert_geq(rl.rlim_cur, 4096, "ulimit -n is too low for the test");
}

/* Starts the server: header_timeout_s (0: default) and per_client as
 * ax_api_options has them. */
static void
start(unsigned header_timeout_s, int per_client)
{
	ax_api_options o = {
		.pool_size        = 3,
		.header_timeout_s = header_timeout_s,
		.per_client       = per_client,
	};
	ax_log_init(AX_LOG_ERROR, 2);
	raise_nofile();
	ax_api_fixture_start_with(&fx, &o);
}

static void
teardown(void)
{
	ax_api_fixture_stop(&fx);
	free(answer);
	answer = NULL;
	json_decref(js);
	js = NULL;
}

static int
port(void)
{
	return ax_api_server_port(fx.srv);
}

/* A blocking TCP connection to the server (send and receive timeouts
 * 15 s: a server that answers and stops reading a request it refused
 * must not hang the sender). */
static int
dial(void)
{
	struct sockaddr_in a  = { .sin_family = AF_INET };
	struct timeval     tv = { .tv_sec = 15 };
	int                fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_geq(fd, 0, "socket: %s", strerror(errno));
	a.sin_port        = htons((uint16_t) port());
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(connect(fd, (struct sockaddr *) &a, sizeof(a)), 0,
	             "connect: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return fd;
}

/* Sends all of p (errors ignored: the server may close first). */
static void
send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		p += w;
		n -= (size_t) w;
	}
}

static void
append_answer(const char *buf, size_t n)
{
	char *p = realloc(answer, answer_len + n + 1);
	cr_assert_not_null(p);
	answer = p;
	memcpy(answer + answer_len, buf, n);
	answer_len += n;
	answer[answer_len] = '\0';
}

/* Reads until EOF (or an error) into answer; parses status and the
 * JSON body into status / js. */
static void
read_answer(int fd)
{
	char  buf[65536];
	char *b;

	free(answer);
	answer     = NULL;
	answer_len = 0;
	json_decref(js);
	js     = NULL;
	status = 0;
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n <= 0)
			break;
		append_answer(buf, (size_t) n);
	}
	if (answer == NULL)
		return;
	sscanf(answer, "HTTP/1.%*d %d", &status);
	if ((b = strstr(answer, "\r\n\r\n")) != NULL)
		js = json_loads(b + 4, 0, NULL);
}

/* One request (with Connection: close) on a fresh connection. */
static void
exchange(const char *req, size_t len)
{
	int fd = dial();
	send_all(fd, req, len);
	read_answer(fd);
	close(fd);
}

/* method path with the given token and body ("" none). */
static void
call(const char *method, const char *path, const char *token, const char *body)
{
	char req[4096];
	int  n = snprintf(req, sizeof(req),
	                  "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
	                   "Authorization: Bearer %s\r\n"
	                   "Content-Length: %zu\r\n\r\n%s",
	                  method, path, token, strlen(body), body);
	exchange(req, (size_t) n);
}

/* Asserts the last answer is status with a JSON error code. */
static void
expect_json_error(int want, const char *code, const char *what)
{
	cr_expect_eq(status, want, "%s: status %d, want %d: %.300s", what,
	             status, want, answer ? answer : "(no answer)");
	cr_expect(answer && strstr(answer, "application/json") != NULL,
	          "%s: not JSON: %.300s", what, answer ? answer : "");
	const char *e = json_string_value(json_object_get(js, "error"));
	cr_expect_str_eq(e ? e : "", code, "%s: %.300s", what,
	                 answer ? answer : "");
	cr_expect(json_is_string(json_object_get(js, "detail")), "%s", what);
}

/* ---- holding 2,000 slow connections ------------------------------------
 */

static int        slow_fd[N_SLOW];
static atomic_int trickle_stop;
static atomic_int trickle_rounds;

/* Sends one more header line on every slowloris connection a second. */
static void *
trickle(void *arg)
{
	while (!atomic_load(&trickle_stop)) {
		for (int i = 0; i < N_SLOW; i++)
			send(slow_fd[i], "X-Slow: 1\r\n", 11,
			     MSG_NOSIGNAL | MSG_DONTWAIT);
		atomic_fetch_add(&trickle_rounds, 1);
		for (int k = 0; k < 10 && !atomic_load(&trickle_stop); k++)
			ax_clock_sleep_us(100 * AX_USEC_PER_MSEC);
	}
	return NULL;
}

/* 1 when fd is still open from the server's side (nothing to read, no
 * hang-up). */
static int
still_open(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };
	return poll(&p, 1, 0) == 0;
}

Test(api_abuse, serves_normal_clients_while_2000_slow_connections_are_held,
     .fini = teardown, .timeout = 120)
{
	static int  idle_fd[N_IDLE];
	pthread_t   th;
	int64_t     worst   = 0;
	const char *paths[] = { "/api/v1/runs", "/api/v1/instances",
		                "/api/v1/events", "/healthz" };

	/* long head deadline: the slow ones must be held, not shed */
	start(60, -1);
	for (int i = 0; i < N_IDLE; i++)
		idle_fd[i] = dial();
	for (int i = 0; i < N_SLOW; i++) {
		slow_fd[i] = dial();
		send_all(slow_fd[i], "GET /api/v1/runs HTTP/1.1\r\n", 27);
	}
	atomic_store(&trickle_stop, 0);
	atomic_store(&trickle_rounds, 0);
	pthread_create(&th, NULL, trickle, NULL);
	while (atomic_load(&trickle_rounds) < 1)
		ax_clock_sleep_us(10 * AX_USEC_PER_MSEC);
	/* served while the slow ones send: 40 requests, and for at least
	 * three more rounds of header lines */
	int rounds0 = atomic_load(&trickle_rounds);
	for (int i = 0; i < 40 || atomic_load(&trickle_rounds) < rounds0 + 3;
	     i++) {
		int64_t t0 = ax_clock_mono_us(), dt;
		call("GET", paths[i % 4], fx.viewer, "");
		dt = ax_clock_mono_us() - t0;
		if (dt > worst)
			worst = dt;
		cr_assert_eq(status, 200,
		             "%s with 2000 slow connections: %d %s",
		             paths[i % 4], status, answer ? answer : "");
	}
	call("POST", "/api/v1/dags/nope/trigger", fx.oper, "{}");
	expect_json_error(404, "not_found", "trigger of an unknown DAG");
	cr_expect_lt(worst, 3 * AX_USEC_PER_SEC,
	             "slowest request %lld us with 2000 slow connections",
	             (long long) worst);
	int open_idle = 0, open_slow = 0;
	for (int i = 0; i < N_IDLE; i++)
		open_idle += still_open(idle_fd[i]);
	for (int i = 0; i < N_SLOW; i++)
		open_slow += still_open(slow_fd[i]);
	cr_expect_eq(open_idle, N_IDLE, "idle connections were shed");
	cr_expect_eq(open_slow, N_SLOW, "slow connections were shed");
	atomic_store(&trickle_stop, 1);
	pthread_join(th, NULL);
	for (int i = 0; i < N_IDLE; i++)
		close(idle_fd[i]);
	for (int i = 0; i < N_SLOW; i++)
		close(slow_fd[i]);
}

/* Reads fd until EOF for at most limit_us; returns the microseconds it
 * took (or limit_us + 1), the bytes in answer. */
static int64_t
time_to_close(int fd, int64_t limit_us, int trickle_line)
{
	int64_t t0 = ax_clock_mono_us(), next = t0;
	char    buf[4096];

	free(answer);
	answer     = NULL;
	answer_len = 0;
	while (ax_clock_mono_us() - t0 <= limit_us) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (trickle_line && ax_clock_mono_us() >= next) {
			send(fd, "X-Slow: 1\r\n", 11, MSG_NOSIGNAL);
			next += 300 * AX_USEC_PER_MSEC;
		}
		if (poll(&p, 1, 50) <= 0)
			continue;
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n <= 0)
			return ax_clock_mono_us() - t0;
		append_answer(buf, (size_t) n);
	}
	return limit_us + 1;
}

Test(api_abuse, a_late_request_head_is_dropped, .fini = teardown,
     .timeout = 60)
{
	int     slow, idle;
	int64_t t;

	start(2, -1);
	idle = dial();
	slow = dial();
	send_all(slow, "GET /healthz HTTP/1.1\r\n", 23);
	/* a header line every 300 ms: the idle timeout alone never fires */
	t = time_to_close(slow, 8 * AX_USEC_PER_SEC, 1);
	cr_expect_lt(t, 4 * AX_USEC_PER_SEC,
	             "a slowloris connection lived %lld us past a 2 s head "
	             "deadline",
	             (long long) t);
	cr_expect_geq(t, 1500 * AX_USEC_PER_MSEC, "dropped too early");
	cr_expect(answer && strncmp(answer, "HTTP/1.1 408", 12) == 0,
	          "no 408: %s", answer ? answer : "(nothing)");
	cr_expect(answer && strstr(answer, "\"request_timeout\"") != NULL,
	          "no JSON error: %s", answer ? answer : "");
	t = time_to_close(idle, 8 * AX_USEC_PER_SEC, 0);
	cr_expect_lt(t, 3 * AX_USEC_PER_SEC,
	             "an idle connection lived %lld us", (long long) t);
	close(slow);
	close(idle);
	/* a normal client is not affected */
	call("GET", "/healthz", fx.viewer, "");
	cr_expect_eq(status, 200);
	cr_expect_geq(ax_api_server_head_timeouts(fx.srv), 2);
}

Test(api_abuse, the_per_client_limit_closes_connection_65, .fini = teardown,
     .timeout = 60)
{
	int     fds[64], extra;
	int64_t t;

	start(0, 0); /* the default: 64 per client address */
	for (int i = 0; i < 64; i++)
		fds[i] = dial();
	/* let the server accept them all */
	ax_clock_sleep_us(300 * AX_USEC_PER_MSEC);
	extra = dial();
	send_all(extra, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 35);
	t = time_to_close(extra, 5 * AX_USEC_PER_SEC, 0);
	cr_expect_lt(t, 3 * AX_USEC_PER_SEC,
	             "connection 65 from one address was not closed");
	cr_expect(answer == NULL, "connection 65 was served: %s", answer);
	close(extra);
	close(fds[0]);
	ax_clock_sleep_us(300 * AX_USEC_PER_MSEC);
	call("GET", "/healthz", fx.viewer, "");
	cr_expect_eq(status, 200, "a slot came free but: %d", status);
	for (int i = 1; i < 64; i++)
		close(fds[i]);
}

/* ---- bad input: every refusal is a JSON error ---------------------------
 */

/* A request, the status and error code it must get, and a text the
 * detail must hold (NULL: any). */
typedef struct bad_case {
	const char *method, *path;
	int         status;
	const char *code, *detail, *what;
} bad_case;

static const bad_case bad_paths[] = {
	{ "GET", "/api/v1/instances/1%00", 400, "invalid", "%00",
	  "NUL after an instance id" },
	{ "GET", "/api/v1/runs/%20%31", 400, "invalid", "digits only",
	  "space before a run id" },
	{ "GET", "/api/v1/runs/1%20", 400, "invalid", "digits only",
	  "space after a run id" },
	{ "GET", "/api/v1/runs/+1", 400, "invalid", NULL, "a sign" },
	{ "GET", "/api/v1/runs/0x10", 400, "invalid", NULL, "hex id" },
	{ "GET", "/api/v1/runs/99999999999999999999", 400, "invalid", NULL,
	  "id over int64" },
	{ "GET", "/api/v1/commands/1%091", 400, "invalid", NULL,
	  "tab in a command id" },
	{ "POST", "/api/v1/instances/%201/kill", 400, "invalid", NULL,
	  "space in a kill id" },
	{ "GET", "/api/v1/dags/demo%00x", 400, "invalid", "%00",
	  "NUL in a DAG name" },
	{ "GET", "/api/v1/dags/demo%20x", 400, "invalid",
	  "separated by single dots", "space in a DAG name" },
	{ "GET", "/api/v1/dags/a..b/versions", 400, "invalid", NULL,
	  "empty word in a DAG name" },
	{ "POST", "/api/v1/dags/%3Bls/pause", 400, "invalid", NULL,
	  "';' in a DAG name" },
	{ "GET", "/api/v1/runs?limit=1%00", 400, "invalid", "%00",
	  "NUL in a query value" },
	{ "DELETE", "/api/v1/rules/0x1", 400, "invalid", NULL, "hex rule id" },
	{ "DELETE", "/api/v1/rules/99999999999999999999", 400, "invalid", NULL,
	  "rule id over int64" },
	{ "GET", "/api/v1/rules/%201/test", 400, "invalid", NULL,
	  "space in a rule id" },
	{ "GET", "/api/v1/rules/-3/test", 400, "invalid", NULL,
	  "negative rule id" },
	/* what is fine stays fine */
	{ "GET", "/api/v1/runs/12", 404, "not_found", NULL,
	  "a run that does not exist" },
	{ "DELETE", "/api/v1/rules/12", 404, "not_found", "no rule 12",
	  "a rule that does not exist" },
	{ "GET", "/api/v1/rules/12/test", 404, "not_found", "no rule 12",
	  "testing a rule that does not exist" },
	{ "GET", "/api/v1/dags/demo.chain-1_x", 404, "not_found", NULL,
	  "a DAG that does not exist" },
};

Test(api_abuse, ids_and_names_are_checked, .fini = teardown, .timeout = 60)
{
	start(0, -1);
	for (size_t i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++) {
		const bad_case *c = &bad_paths[i];
		call(c->method, c->path, fx.oper, "");
		expect_json_error(c->status, c->code, c->what);
		if (c->detail != NULL)
			cr_expect(answer && strstr(answer, c->detail) != NULL,
			          "%s: want '%s' in %s", c->what, c->detail,
			          answer ? answer : "");
	}
}

Test(api_abuse, bodies_are_checked, .fini = teardown, .timeout = 60)
{
	start(0, -1);
	call("GET", "/api/v1/runs", fx.viewer, "{}");
	expect_json_error(400, "invalid", "a body on a GET");
	cr_expect(strstr(answer, "takes no request body") != NULL, "%s",
	          answer);
	static const char *const routes[] = {
		"/api/v1/instances/1/kill",
		"/api/v1/dags/demo/pause",
		"/api/v1/dags/demo/unpause",
	};
	for (size_t i = 0; i < 3; i++) {
		call("POST", routes[i], fx.oper, "{oops");
		expect_json_error(400, "bad_json", routes[i]);
		call("POST", routes[i], fx.oper, "[1]");
		expect_json_error(400, "invalid", routes[i]);
		call("POST", routes[i], fx.oper, "{\"force\": true}");
		expect_json_error(400, "invalid", routes[i]);
		cr_expect(strstr(answer, "'force'") != NULL, "%s", answer);
		/* {} and no body pass the check (then: no such thing) */
		call("POST", routes[i], fx.oper, "{}");
		expect_json_error(404, "not_found", routes[i]);
		call("POST", routes[i], fx.oper, "");
		expect_json_error(404, "not_found", routes[i]);
	}
	call("POST", "/api/v1/instances/1/clear", fx.oper, "{\"downstream\"");
	expect_json_error(400, "bad_json", "truncated JSON on clear");
	/* rules: every refusal names the member */
	call("POST", "/api/v1/rules", fx.oper, "{\"action\":\"block\"");
	expect_json_error(400, "bad_json", "truncated rule");
	call("POST", "/api/v1/rules", fx.oper, "[1]");
	expect_json_error(400, "invalid", "a rule that is an array");
	call("POST", "/api/v1/rules", fx.oper, "");
	expect_json_error(400, "invalid", "a rule without a body");
	call("POST", "/api/v1/rules", fx.oper,
	     "{\"action\":\"block\",\"dag\":\"x\",\"window\":{\"start\":"
	     "\"9:00\",\"end\":\"10:00\"}}");
	expect_json_error(400, "invalid", "a window start without HH:MM");
	cr_expect(strstr(answer, "window.start") != NULL, "%s", answer);
	call("POST", "/api/v1/rules", fx.oper,
	     "{\"action\":\"block\",\"dag\":\"\\u0000x\"}");
	expect_json_error(400, "bad_json", "a NUL in a rule's dag glob");
	call("DELETE", "/api/v1/rules/1", fx.oper, "{}");
	expect_json_error(400, "invalid", "a body on a rule DELETE");
	call("POST", "/api/v1/rules", fx.viewer, "{}");
	expect_json_error(403, "forbidden", "a viewer creating a rule");
	cr_expect_eq(ax_api_fixture_int(&fx, "SELECT count(*) FROM rules"), 0);
}

/* A head of n bytes (one big header). */
static void
big_head(size_t n)
{
	const char *pre = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ";
	char       *req = malloc(n + 64);
	size_t      k   = strlen(pre);

	cr_assert_not_null(req);
	memcpy(req, pre, k);
	memset(req + k, 'a', n - k);
	memcpy(req + n, "\r\n\r\n", 4);
	exchange(req, n + 4);
	free(req);
}

Test(api_abuse, oversized_heads_are_431, .fini = teardown, .timeout = 60)
{
	start(0, -1);
	big_head(20 * 1024);
	expect_json_error(431, "header_too_large", "a 20 KiB head");
	cr_expect(strstr(answer, "api.max_header") != NULL, "%s", answer);
	big_head(40 * 1024);
	expect_json_error(431, "header_too_large", "a 40 KiB head");
	/* past MHD's connection memory MHD answers itself (HTML): the
	 * status must still be 431, and the server still serves */
	big_head(1024 * 1024);
	cr_expect_eq(status, 431, "a 1 MB head: status %d", status);
	call("GET", "/healthz", fx.viewer, "");
	cr_expect_eq(status, 200);
}

/* Sends a body of n bytes in 64 KiB chunks, chunked or with a length. */
static void
big_body(size_t n, int chunked)
{
	static char chunk[65536];
	char        head[512];
	int         fd = dial();
	int         k  = snprintf(head, sizeof(head),
	                          "POST /api/v1/dags HTTP/1.1\r\nHost: x\r\n"
	                                   "Connection: close\r\n"
	                                   "Authorization: Bearer %s\r\n",
	                          fx.admin);

	memset(chunk, 'x', sizeof(chunk));
	if (chunked)
		k += snprintf(head + k, sizeof(head) - (size_t) k,
		              "Transfer-Encoding: chunked\r\n\r\n");
	else
		k += snprintf(head + k, sizeof(head) - (size_t) k,
		              "Content-Length: %zu\r\n\r\n", n);
	send_all(fd, head, (size_t) k);
	for (size_t sent = 0; sent < n; sent += sizeof(chunk)) {
		char cl[16];
		if (chunked) {
			snprintf(cl, sizeof(cl), "%zx\r\n", sizeof(chunk));
			send_all(fd, cl, strlen(cl));
		}
		send_all(fd, chunk, sizeof(chunk));
		if (chunked)
			send_all(fd, "\r\n", 2);
	}
	if (chunked)
		send_all(fd, "0\r\n\r\n", 5);
	read_answer(fd);
	close(fd);
}

Test(api_abuse, bodies_over_the_limit_are_413, .fini = teardown,
     .timeout = 120)
{
	start(0, -1);
	big_body(2 * 1024 * 1024, 0);
	expect_json_error(413, "payload_too_large", "2 MB with a length");
	big_body(2 * 1024 * 1024, 1);
	expect_json_error(413, "payload_too_large", "2 MB chunked");
	big_body(20 * 1024 * 1024, 1);
	expect_json_error(413, "payload_too_large", "20 MB chunked");
	call("GET", "/healthz", fx.viewer, "");
	cr_expect_eq(status, 200);
}
