/*
 * bench_api.c - requests per second and latency of a real ax-api process
 * for a realistic mix, with and without 2,000 slow connections held open.
 *
 * A throwaway cluster (tests/pg_harness.h) with one DAG, 500 runs of 4
 * instances and 5,000 events; ax-api (from $AX_BIN_DIR, else next to
 * this binary) on a free port with its default limits, except no
 * per-client limit (every connection here comes from 127.0.0.1). C
 * client threads, each on one keep-alive connection, send the mix: 30 %
 * GET /api/v1/runs?limit=50, 30 % /api/v1/instances?limit=50, 30 %
 * /api/v1/events?limit=50, 10 % POST .../trigger. Each phase runs D
 * seconds and prints requests per second and P50 / P99 / max latency,
 * per kind and in all:
 *   1. the mix alone;
 *   2. the mix while 1,000 idle and 1,000 slowloris connections (a
 *      request line, then one header line a second) are held; a dropped
 *      slow connection (head deadline, api.header_timeout) is opened
 *      again at once, as an attacker would.
 * Prints numbers; asserts nothing about speed.
 *
 * Usage: AX_BIN_DIR=build build/tests/bench_api [--quick] [--clients C]
 *        [--seconds D]. Defaults: 8 clients, 15 s (quick: 4 s): a
 *        phase longer than api.header_timeout (10 s) shows the drops.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api_token.h"
#include "clock.h"
#include "log.h"
#include "migrate.h"
#include "pg_harness.h"
#include "proc.h"
#include "store.h"

#define N_IDLE  1000
#define N_SLOW  1000
#define N_KINDS 4
#define MAX_LAT 2000000 /* samples per kind */

static const char *const kind_name[N_KINDS] = { "list runs", "list instances",
	                                        "list events", "trigger" };

static int         port;
static char        viewer[AX_API_TOKEN_LEN], oper[AX_API_TOKEN_LEN];
static atomic_int  stop_load, stop_slow;
static int64_t    *lat[N_KINDS]; /* us */
static atomic_long n_lat[N_KINDS];
static atomic_long n_err;

static int
dial(void)
{
	struct sockaddr_in a  = { .sin_family = AF_INET };
	struct timeval     tv = { .tv_sec = 30 };
	int                fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_port        = htons((uint16_t) port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *) &a, sizeof(a)) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static int
send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t) w;
	}
	return 0;
}

/*
 * One request on keep-alive connection *fd (reopened when the server
 * closed it); returns the status, 0 on a broken connection. The answer
 * must carry a Content-Length (every ax-api answer but a log follow).
 */
static int
request(int *fd, const char *method, const char *path, const char *token,
        const char *body)
{
	static __thread char buf[1 << 20];
	char                 req[1024];
	size_t               have = 0;
	int                  n, st = 0;

	n = snprintf(req, sizeof(req),
	             "%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
	             "%s\r\nContent-Length: %zu\r\n\r\n%s",
	             method, path, token, strlen(body), body);
	if (*fd < 0 && (*fd = dial()) < 0)
		return 0;
	if (send_all(*fd, req, (size_t) n) != 0)
		goto broken;
	for (;;) {
		ssize_t r = recv(*fd, buf + have, sizeof(buf) - 1 - have, 0);
		char   *end, *cl;
		if (r <= 0)
			goto broken;
		have += (size_t) r;
		buf[have] = '\0';
		if ((end = strstr(buf, "\r\n\r\n")) == NULL)
			continue;
		sscanf(buf, "HTTP/1.%*d %d", &st);
		cl = strcasestr(buf, "Content-Length:");
		if (cl == NULL || cl > end)
			goto broken;
		size_t want =
		    (size_t) (end + 4 - buf) + strtoul(cl + 15, 0, 10);
		if (have >= want)
			return st;
	}
broken:
	close(*fd);
	*fd = -1;
	return 0;
}

static void *
client_main(void *arg)
{
	unsigned seed = (unsigned) (uintptr_t) arg * 7919u + 1;
	int      fd   = -1;

	while (!atomic_load(&stop_load)) {
		int     r  = (int) (rand_r(&seed) % 10), k, st;
		int64_t t0 = ax_clock_mono_us();
		k          = r < 3 ? 0 : r < 6 ? 1 : r < 9 ? 2 : 3;
		switch (k) {
		case 0:
			st = request(&fd, "GET", "/api/v1/runs?limit=50",
			             viewer, "");
			break;
		case 1:
			st = request(&fd, "GET", "/api/v1/instances?limit=50",
			             viewer, "");
			break;
		case 2:
			st = request(&fd, "GET", "/api/v1/events?limit=50",
			             viewer, "");
			break;
		default:
			st = request(&fd, "POST",
			             "/api/v1/dags/bench.mix/trigger", oper,
			             "{}");
			break;
		}
		int64_t dt = ax_clock_mono_us() - t0;
		if (st < 200 || st >= 300) {
			atomic_fetch_add(&n_err, 1);
			continue;
		}
		long i = atomic_fetch_add(&n_lat[k], 1);
		if (i < MAX_LAT)
			lat[k][i] = dt;
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* ---- slow connections --------------------------------------------------- */

static int         slow_fd[N_IDLE + N_SLOW];
static atomic_long slow_reopened;

static int
open_slow(int i)
{
	int fd = dial();
	if (fd >= 0 && i >= N_IDLE)
		send_all(fd, "GET /api/v1/runs HTTP/1.1\r\n", 27);
	return fd;
}

/* Once a second: a header line on every slowloris connection; any slow
 * connection the server closed is opened again. */
static void *
slow_main(void *arg)
{
	while (!atomic_load(&stop_slow)) {
		for (int i = 0; i < N_IDLE + N_SLOW; i++) {
			struct pollfd p = { .fd     = slow_fd[i],
				            .events = POLLIN | POLLRDHUP };
			if (slow_fd[i] < 0 || (poll(&p, 1, 0) > 0)) {
				if (slow_fd[i] >= 0)
					close(slow_fd[i]);
				slow_fd[i] = open_slow(i);
				atomic_fetch_add(&slow_reopened, 1);
				continue;
			}
			if (i >= N_IDLE)
				send(slow_fd[i], "X-Slow: 1\r\n", 11,
				     MSG_NOSIGNAL | MSG_DONTWAIT);
		}
		for (int k = 0; k < 10 && !atomic_load(&stop_slow); k++)
			ax_clock_sleep_us(100 * AX_USEC_PER_MSEC);
	}
	return NULL;
}

/* ---- phases ------------------------------------------------------------- */

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
	return x < y ? -1 : x > y;
}

static void
print_row(const char *what, int64_t *v, long n, double secs)
{
	if (n <= 0) {
		printf("  %-16s %8s\n", what, "none");
		return;
	}
	qsort(v, (size_t) n, sizeof(*v), cmp_i64);
	printf("  %-16s %8.0f req/s  P50 %7.2f ms  P99 %7.2f ms  max %7.2f "
	       "ms\n",
	       what, n / secs, v[n / 2] / 1000.0, v[n * 99 / 100] / 1000.0,
	       v[n - 1] / 1000.0);
}

static void
phase(const char *title, int clients, int secs)
{
	pthread_t *th    = calloc((size_t) clients, sizeof(*th));
	int64_t   *all   = NULL;
	long       total = 0;

	for (int k = 0; k < N_KINDS; k++)
		atomic_store(&n_lat[k], 0);
	atomic_store(&n_err, 0);
	atomic_store(&stop_load, 0);
	for (int i = 0; i < clients; i++)
		pthread_create(&th[i], NULL, client_main,
		               (void *) (uintptr_t) (i + 1));
	ax_clock_sleep_us((int64_t) secs * AX_USEC_PER_SEC);
	atomic_store(&stop_load, 1);
	for (int i = 0; i < clients; i++)
		pthread_join(th[i], NULL);
	printf("%s (%d clients, %d s):\n", title, clients, secs);
	for (int k = 0; k < N_KINDS; k++) {
		long n = atomic_load(&n_lat[k]);
		if (n > MAX_LAT)
			n = MAX_LAT;
		n_lat[k] = n;
		total += n;
	}
	all   = malloc((size_t) (total ? total : 1) * sizeof(*all));
	total = 0;
	for (int k = 0; k < N_KINDS; k++) {
		long n = atomic_load(&n_lat[k]);
		memcpy(all + total, lat[k], (size_t) n * sizeof(*all));
		total += n;
		print_row(kind_name[k], lat[k], n, secs);
	}
	print_row("all", all, total, secs);
	printf("  errors (non-2xx or broken): %ld\n", atomic_load(&n_err));
	free(all);
	free(th);
}

/* ---- set-up ------------------------------------------------------------- */

static int
free_port(void)
{
	struct sockaddr_in a   = { .sin_family = AF_INET };
	socklen_t          len = sizeof(a);
	int                fd = socket(AF_INET, SOCK_STREAM, 0), p = 0;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *) &a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *) &a, &len) == 0)
		p = ntohs(a.sin_port);
	close(fd);
	return p;
}

static const char *const seed_sql[] = {
	"INSERT INTO dag_runs (dag_id, dag_version_id, run_type, "
	"logical_date, interval_start, interval_end, state) SELECT d.id, "
	"d.active_version_id, 'scheduled', ax_ts(g::bigint * 60000000), "
	"ax_ts(g::bigint * 60000000), ax_ts(g::bigint * 60000000), 'SUCCESS' "
	"FROM dags d, "
	"generate_series(1, 500) g",
	"INSERT INTO task_instances (dag_run_id, dag_id, task, logical_time, "
	"state) SELECT r.id, r.dag_id, t, r.logical_date, 'SUCCESS' FROM "
	"dag_runs r, unnest(ARRAY['a', 'b', 'c', 'd']) t",
	"INSERT INTO event_log (event_id, type, dag_id, dag_run_id, "
	"instance_id, payload) SELECT gen_random_uuid(), 'instance.success', "
	"i.dag_id, i.dag_run_id, i.id, '{\"bench\": true}' FROM "
	"task_instances i, generate_series(1, 3) g LIMIT 5000",
};

static const char *dag_yaml =
    "kind: DAG\nname: bench.mix\nschedule: {cron: \"0 0 * * * ?\"}\n"
    "tasks:\n"
    "  - {name: a, type: bash, command: \"echo a\"}\n"
    "  - {name: b, type: bash, command: \"echo b\", depends_on: [a]}\n"
    "  - {name: c, type: bash, command: \"echo c\", depends_on: [a]}\n"
    "  - {name: d, type: bash, command: \"echo d\", depends_on: [b, c]}\n";

static int
submit_dag(const char *admin)
{
	char body[1024], req[2048];
	int  fd = dial(), n;
	snprintf(body, sizeof(body), "%s", dag_yaml);
	n = snprintf(req, sizeof(req),
	             "POST /api/v1/dags HTTP/1.1\r\nHost: x\r\n"
	             "Connection: close\r\nAuthorization: Bearer %s\r\n"
	             "Content-Length: %zu\r\n\r\n%s",
	             admin, strlen(body), body);
	if (fd < 0 || send_all(fd, req, (size_t) n) != 0)
		return 0;
	n = (int) recv(fd, req, sizeof(req) - 1, 0);
	close(fd);
	return n > 12 && strncmp(req + 9, "201", 3) == 0;
}

static ax_err
seed(const char *dsn, char *admin)
{
	ax_store *st;
	ax_err    rv;

	if ((rv = ax_migrate_run(dsn, NULL)) != AX_OK ||
	    (rv = ax_store_open(dsn, &st)) != AX_OK)
		return rv;
	if ((rv = ax_api_token_create(st, AX_API_ROLE_ADMIN, "a", admin,
	                              NULL)) == AX_OK &&
	    (rv = ax_api_token_create(st, AX_API_ROLE_VIEWER, "v", viewer,
	                              NULL)) == AX_OK)
		rv = ax_api_token_create(st, AX_API_ROLE_OPERATOR, "o", oper,
		                         NULL);
	ax_store_close(st);
	return rv;
}

static ax_err
seed_rows(const char *dsn)
{
	ax_store *st;
	ax_err    rv;

	if ((rv = ax_store_open(dsn, &st)) != AX_OK)
		return rv;
	for (size_t i = 0;
	     rv == AX_OK && i < sizeof(seed_sql) / sizeof(seed_sql[0]); i++)
		rv = ax_store_exec(st, seed_sql[i], 0, NULL);
	ax_store_close(st);
	return rv;
}

static int
start_api(ax_proc *p, const char *dsn, char *dir)
{
	char  bin[4096], cfg[4200], logp[4200];
	FILE *f;

	if (ax_proc_find_bin("ax-api", bin, sizeof(bin)) != AX_OK)
		return 0;
	snprintf(cfg, sizeof(cfg), "%s/ax.yaml", dir);
	snprintf(logp, sizeof(logp), "%s/ax-api.log", dir);
	if ((f = fopen(cfg, "w")) == NULL)
		return 0;
	fprintf(f,
	        "log: {level: warn}\ndatabase: {dsn: \"%s\", pool: 4}\n"
	        "api: {port: %d}\n",
	        dsn, port);
	fclose(f);
	/* in the environment, so an ax-api without the key ignores it */
	const char *const env[]  = { "AX_API_MAX_CONNECTIONS_PER_CLIENT=0",
		                     NULL };
	ax_proc_opts      po     = { .env = env };
	char             *argv[] = { "ax-api", "--config", cfg, NULL };
	if (ax_proc_start(p, "ax-api", bin, argv, logp, &po) != AX_OK)
		return 0;
	for (int i = 0; i < 200; i++) {
		int fd = dial();
		if (fd >= 0) {
			close(fd);
			return 1;
		}
		ax_clock_sleep_us(50 * AX_USEC_PER_MSEC);
	}
	return 0;
}

int
main(int argc, char **argv)
{
	int           clients = 8, secs = 15;
	ax_test_pg   *pg = NULL;
	ax_proc       api;
	char          admin[AX_API_TOKEN_LEN], dir[] = "/tmp/bench-api-XXXXXX";
	pthread_t     slow;
	struct rlimit rl;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick"))
			secs = 4;
		else if (!strcmp(argv[i], "--clients") && i + 1 < argc)
			clients = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			secs = atoi(argv[++i]);
		else {
			fprintf(stderr,
			        "usage: bench_api [--quick] [--clients C] "
			        "[--seconds D]\n");
			return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	ax_log_init(AX_LOG_ERROR, 2);
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	for (int k = 0; k < N_KINDS; k++)
		lat[k] = malloc(MAX_LAT * sizeof(int64_t));
	port = free_port();
	if (mkdtemp(dir) == NULL || ax_test_pg_start(&pg) != AX_OK ||
	    seed(ax_test_pg_dsn(pg), admin) != AX_OK) {
		fprintf(stderr, "bench_api: %s\n", ax_err_detail());
		return 1;
	}
	if (!start_api(&api, ax_test_pg_dsn(pg), dir)) {
		fprintf(stderr,
		        "bench_api: ax-api did not start (set AX_BIN_DIR to "
		        "the build directory; log in %s)\n",
		        dir);
		return 1;
	}
	if (!submit_dag(admin) || seed_rows(ax_test_pg_dsn(pg)) != AX_OK) {
		fprintf(stderr, "bench_api: seeding failed: %s\n",
		        ax_err_detail());
		ax_proc_stop(&api, 5 * AX_USEC_PER_SEC);
		return 1;
	}
	printf("ax-api on port %d: 1 DAG, 500 runs, 2000 instances, 5000 "
	       "events; mix 30%% runs, 30%% instances, 30%% events, 10%% "
	       "trigger\n",
	       port);
	phase("the mix alone", clients, secs);

	for (int i = 0; i < N_IDLE + N_SLOW; i++)
		slow_fd[i] = open_slow(i);
	int held = 0;
	for (int i = 0; i < N_IDLE + N_SLOW; i++)
		held += slow_fd[i] >= 0;
	printf("\nopened %d slow connections (%d idle, %d slowloris)\n", held,
	       N_IDLE, N_SLOW);
	atomic_store(&stop_slow, 0);
	pthread_create(&slow, NULL, slow_main, NULL);
	phase("the mix with 2000 slow connections held", clients, secs);
	atomic_store(&stop_slow, 1);
	pthread_join(slow, NULL);
	printf("  slow connections dropped by the server and reopened: %ld\n",
	       atomic_load(&slow_reopened));
	for (int i = 0; i < N_IDLE + N_SLOW; i++)
		if (slow_fd[i] >= 0)
			close(slow_fd[i]);
	ax_proc_stop(&api, 10 * AX_USEC_PER_SEC);
	ax_test_pg_stop(pg);
	return 0;
}
