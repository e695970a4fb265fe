/*
 * e2e_harness.c - the end-to-end test harness (see e2e_harness.h).
 */
#include "e2e_harness.h"

#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "cmd_dag.h"
#include "log.h"
#include "store.h"

ax_e2e *
ax_e2e_new(int workers, const char *extra_yaml)
{
	return ax_e2e_new_as(workers, extra_yaml, "root");
}

ax_e2e *
ax_e2e_new_as(int workers, const char *extra_yaml, const char *run_as)
{
	ax_e2e *e = calloc(1, sizeof(*e));

	cr_assert_not_null(e);
	ax_log_init(AX_LOG_WARN, 2);
	cr_assert_eq(ax_test_pg_start_migrated(&e->pg), AX_OK, "%s",
	             ax_err_detail());
	ax_stack_opts o = {
		.home          = ax_test_pg_home(e->pg),
		.dsn           = ax_test_pg_dsn(e->pg),
		.workers       = workers,
		.log_level     = "debug",
		.extra_yaml    = extra_yaml,
		.worker_run_as = run_as,
	};
	cr_assert_eq(ax_stack_init(&e->st, &o), AX_OK, "%s", ax_err_detail());
	snprintf(e->dags, sizeof(e->dags), "%s/dags", e->st.home);
	cr_assert(mkdir(e->dags, 0755) == 0 || errno == EEXIST);
	e->db = PQconnectdb(ax_test_pg_dsn(e->pg));
	cr_assert_eq(PQstatus(e->db), CONNECTION_OK, "%s",
	             PQerrorMessage(e->db));
	return e;
}

void
ax_e2e_free(ax_e2e *e)
{
	if (e == NULL)
		return;
	ax_stack_stop(&e->st, 10 * AX_USEC_PER_SEC);
	ax_stack_fini(&e->st);
	PQfinish(e->db);
	ax_test_pg_stop(e->pg);
	free(e);
}

static void
dump_file(const char *path, int lines)
{
	char tail[8192];
	fprintf(stderr, "---- end of %s ----\n%s", path,
	        ax_proc_log_tail(path, lines, tail, sizeof(tail)));
}

void
ax_e2e_dump(ax_e2e *e)
{
	char      path[PATH_MAX + 64];
	PGresult *r;

	snprintf(path, sizeof(path), "%s/axd.log", e->st.log_dir);
	dump_file(path, 40);
	for (int i = 0; i < e->st.n_workers; i++) {
		snprintf(path, sizeof(path), "%s/worker-%d.log", e->st.log_dir,
		         i + 1);
		dump_file(path, 20);
	}
	r = PQexec(e->db,
	           "SELECT t.id, t.task, t.shard, t.state, t.reason, "
	           "t.try_number, (SELECT string_agg(a.number || ':' || "
	           "a.state || '@' || coalesce(a.worker_id, '-'), ' ' ORDER "
	           "BY a.number) FROM attempts a WHERE a.instance_id = t.id) "
	           "FROM task_instances t ORDER BY t.id");
	fprintf(stderr, "---- task_instances ----\n");
	for (int i = 0; PQresultStatus(r) == PGRES_TUPLES_OK &&
	     i < PQntuples(r) && i < 60;
	     i++)
		fprintf(stderr, "%s %s[%s] %s reason=%s try=%s attempts=%s\n",
		        PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
		        PQgetvalue(r, i, 2), PQgetvalue(r, i, 3),
		        PQgetvalue(r, i, 4), PQgetvalue(r, i, 5),
		        PQgetvalue(r, i, 6));
	PQclear(r);
}

void
ax_e2e_load(ax_e2e *e, const char *file, const char *dag, const char *yaml)
{
	char  path[PATH_MAX + 128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.yaml", e->dags, file);
	cr_assert_not_null(f = fopen(path, "w"));
	fputs(yaml, f);
	fclose(f);
	cr_assert_eq(ax_dag_load_dir(e->dags, NULL, ax_test_pg_dsn(e->pg)), 0,
	             "loading %s failed (see stderr)", path);
	if (dag != NULL) {
		char        payload[512];
		const char *params[] = { payload };
		snprintf(payload, sizeof(payload),
		         "{\"op\":\"dag_changed\",\"dag\":\"%s\"}", dag);
		PGresult *r =
		    PQexecParams(e->db, "SELECT pg_notify('ax_control', $1)",
		                 1, NULL, params, NULL, NULL, 0);
		cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s",
		             PQerrorMessage(e->db));
		PQclear(r);
	}
}

void
ax_e2e_start_axd(ax_e2e *e)
{
	ax_err rv = ax_stack_start_axd(&e->st, 60 * AX_USEC_PER_SEC);
	if (rv != AX_OK)
		ax_e2e_dump(e);
	cr_assert_eq(rv, AX_OK, "axd: %s", ax_err_detail());
}

void
ax_e2e_start_workers(ax_e2e *e)
{
	ax_err rv = ax_stack_start_workers(&e->st);
	cr_assert_eq(rv, AX_OK, "workers: %s", ax_err_detail());
}

/* Binds port on 127.0.0.1 (0: the kernel picks one); returns the bound
 * port with connect_only 0, or 1 when a connect() to it succeeds. */
static int
loopback(int port, int connect_only)
{
	struct sockaddr_in a   = { .sin_family = AF_INET };
	socklen_t          len = sizeof(a);
	int                fd  = socket(AF_INET, SOCK_STREAM, 0);
	int                rc  = -1;

	if (fd < 0)
		return -1;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port        = htons((uint16_t) port);
	if (connect_only)
		rc = connect(fd, (struct sockaddr *) &a, sizeof(a)) == 0;
	else if (bind(fd, (struct sockaddr *) &a, sizeof(a)) == 0 &&
	         getsockname(fd, (struct sockaddr *) &a, &len) == 0)
		rc = ntohs(a.sin_port);
	close(fd);
	return rc;
}

int
ax_e2e_start_api(ax_e2e *e)
{
	char    why[1024] = "", ps[16];
	int     up, port = loopback(0, 0);
	int64_t deadline;

	cr_assert_gt(port, 0, "no free port: %s", strerror(errno));
	snprintf(ps, sizeof(ps), "%d", port);
	setenv("AX_API_PORT", ps, 1);
	cr_assert_eq(ax_stack_start_api(&e->st, &up, why, sizeof(why)), AX_OK,
	             "ax-api: %s", ax_err_detail());
	cr_assert(up, "ax-api did not start: %s", why);
	deadline = ax_clock_mono_us() + 10 * AX_USEC_PER_SEC;
	while (loopback(port, 1) != 1) {
		cr_assert(ax_proc_poll(&e->st.api), "ax-api exited");
		cr_assert_lt(ax_clock_mono_us(), deadline,
		             "ax-api does not accept connections on port %d",
		             port);
		ax_clock_sleep_us(50 * AX_USEC_PER_MSEC);
	}
	return port;
}

/*
 * Why a process did not exit: the last lines of its log and every
 * thread's stack (gdb, when installed), to stderr, so that a rare hang
 * (seen under the sanitizers) can be diagnosed from the CI log.
 */
static void
report_hang(const ax_proc *p)
{
	char cmd[PATH_MAX * 2 + 256];
	fprintf(stderr, "---- %s (pid %ld) did not exit; last lines of %s:\n",
	        p->name, (long) p->pid, p->log_path);
	fflush(stderr);
	snprintf(cmd, sizeof(cmd), "tail -n 40 '%s' >&2", p->log_path);
	if (system(cmd) != 0)
		fprintf(stderr, "(no log)\n");
	snprintf(cmd, sizeof(cmd),
	         "command -v gdb >/dev/null && timeout 60 gdb -batch -nx -p "
	         "%ld -ex 'thread apply all bt 12' 2>/dev/null | grep -E "
	         "'^(Thread|#)' | head -n 400 >&2",
	         (long) p->pid);
	fprintf(stderr, "---- %s: thread stacks\n", p->name);
	fflush(stderr);
	if (system(cmd) != 0)
		fprintf(stderr, "(gdb unavailable)\n");
}

static void
kill_proc(ax_proc *p, int sig)
{
	cr_assert(p->running, "%s is not running", p->name);
	p->stopping = 1; /* expected: ax_stack_check must not complain */
	ax_proc_signal(p, sig);
	if (ax_proc_wait(p, 30 * AX_USEC_PER_SEC) != AX_OK) {
		report_hang(p);
		cr_assert_fail("%s did not exit after signal %d", p->name,
		               sig);
	}
}

void
ax_e2e_kill_axd(ax_e2e *e, int sig)
{
	kill_proc(&e->st.axd, sig);
}

void
ax_e2e_kill_worker(ax_e2e *e, int i, int sig)
{
	cr_assert(i >= 0 && i < e->st.n_workers);
	kill_proc(&e->st.workers[i], sig);
}

static PGresult *
vquery(ax_e2e *e, const char *fmt, va_list ap)
{
	char      sql[8192];
	PGresult *r;

	vsnprintf(sql, sizeof(sql), fmt, ap);
	r = PQexec(e->db, sql);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		char msg[1024];
		snprintf(msg, sizeof(msg), "%s", PQerrorMessage(e->db));
		PQclear(r);
		cr_assert_fail("query failed: %s\n%s", msg, sql);
	}
	return r;
}

int64_t
ax_e2e_int(ax_e2e *e, const char *fmt, ...)
{
	va_list   ap;
	PGresult *r;
	int64_t   v = -1;

	va_start(ap, fmt);
	r = vquery(e, fmt, ap);
	va_end(ap);
	if (PQntuples(r) > 0 && !PQgetisnull(r, 0, 0)) {
		const char *s = PQgetvalue(r, 0, 0);
		v = s[0] == 't' ? 1 : s[0] == 'f' ? 0 : strtoll(s, NULL, 10);
	}
	PQclear(r);
	return v;
}

char *
ax_e2e_text(ax_e2e *e, char *buf, size_t len, const char *fmt, ...)
{
	va_list   ap;
	PGresult *r;

	va_start(ap, fmt);
	r = vquery(e, fmt, ap);
	va_end(ap);
	snprintf(buf, len, "%s", PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "");
	PQclear(r);
	return buf;
}

void
ax_e2e_wait(ax_e2e *e, double timeout_s, const char *what, const char *fmt,
            ...)
{
	char     sql[8192];
	va_list  ap;
	int64_t  deadline = ax_clock_mono_us() + (int64_t) (timeout_s * 1e6);
	ax_proc *dead;

	va_start(ap, fmt);
	vsnprintf(sql, sizeof(sql), fmt, ap);
	va_end(ap);
	for (;;) {
		if (ax_e2e_int(e, "%s", sql) > 0)
			return;
		if ((dead = ax_stack_check(&e->st)) != NULL) {
			char how[96];
			ax_e2e_dump(e);
			cr_assert_fail(
			    "waiting for %s: %s %s", what, dead->name,
			    ax_proc_describe(dead, how, sizeof(how)));
		}
		if (ax_clock_mono_us() > deadline) {
			ax_e2e_dump(e);
			cr_assert_fail("%s did not happen within %.0f s (%s)",
			               what, timeout_s, sql);
		}
		ax_clock_sleep_us(100 * AX_USEC_PER_MSEC);
	}
}

void
ax_e2e_marks_new(char *dir, size_t len, const char *prefix)
{
	snprintf(dir, len, "/tmp/%s-XXXXXX", prefix);
	cr_assert_not_null(mkdtemp(dir), "mkdtemp %s: %s", dir,
	                   strerror(errno));
	chmod(dir, 0777);
}

void
ax_e2e_marks_free(const char *dir)
{
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		cr_log_warn("could not remove %s", dir);
}

char *
ax_e2e_at(double secs, char *buf, size_t len)
{
	time_t    t = (time_t) ((double) ax_clock_utc_us() / 1e6 + secs + 1);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return buf;
}

void
ax_e2e_start_api_token(ax_e2e *e, ax_api_role role, const char *name,
                       char *url, size_t urlcap, char token[AX_API_TOKEN_LEN])
{
	ax_store *st;

	snprintf(url, urlcap, "http://127.0.0.1:%d", ax_e2e_start_api(e));
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(e->pg), &st), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_api_token_create(st, role, name, token, NULL), AX_OK,
	             "%s", ax_err_detail());
	ax_store_close(st);
	setenv("AX_SERVER", url, 1);
	setenv("AX_TOKEN", token, 1);
}

static size_t
on_body(char *p, size_t sz, size_t n, void *u)
{
	ax_e2e_answer *a = u;
	size_t         k = sz * n, room = sizeof(a->body) - 1 - a->len;

	memcpy(a->body + a->len, p, k < room ? k : room);
	a->len += k < room ? k : room;
	a->body[a->len] = '\0';
	return k;
}

void
ax_e2e_trigger(const char *url, const char *token, const char *dag)
{
	char          path[128];
	ax_e2e_answer a;

	snprintf(path, sizeof(path), "/api/v1/dags/%s/trigger", dag);
	ax_e2e_http(url, token, "POST", path, "{}", 2, NULL, &a);
	cr_assert(a.status == 201 || a.status == 202 || a.status == 200,
	          "trigger %s: %ld %s", dag, a.status, a.body);
	json_decref(a.js);
}

void
ax_e2e_http(const char *url, const char *token, const char *method,
            const char *path, const char *body, size_t len, const char *key,
            ax_e2e_answer *a)
{
	CURL              *c = curl_easy_init();
	struct curl_slist *h = NULL;
	char               u[1024], auth[AX_API_TOKEN_LEN + 32], idem[320];
	CURLcode           rc;

	cr_assert_not_null(c);
	a->status  = 0;
	a->js      = NULL;
	a->len     = 0;
	a->body[0] = '\0';
	snprintf(u, sizeof(u), "%s%s", url, path);
	if (token != NULL) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s",
		         token);
		h = curl_slist_append(h, auth);
	}
	h = curl_slist_append(h, "Expect:");
	if (body != NULL)
		h = curl_slist_append(h, "Content-Type: application/json");
	if (key != NULL) {
		snprintf(idem, sizeof(idem), "Idempotency-Key: %s", key);
		h = curl_slist_append(h, idem);
	}
	curl_easy_setopt(c, CURLOPT_URL, u);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
	if (body != NULL) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long) len);
	} else if (strcmp(method, "POST") == 0) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
	}
	rc = curl_easy_perform(c);
	cr_assert_eq(rc, CURLE_OK, "%s %s: %s", method, path,
	             curl_easy_strerror(rc));
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a->status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	a->js = json_loadb(a->body, a->len, 0, NULL);
}

void
ax_e2e_use_axctl(void)
{
	char axctl[PATH_MAX];

	cr_assert_not_null(getenv("AX_BIN_DIR"), "AX_BIN_DIR is not set");
	snprintf(axctl, sizeof(axctl), "%s/axctl", getenv("AX_BIN_DIR"));
	setenv("AXCTL", axctl, 1);
}
