/*
 * stack.c - axd + workers + ax-api on one machine (see stack.h).
 *
 * The children learn everything from one config file, so a user can rerun
 * any of them by hand with `--config $home/ax.yaml` while debugging.
 */
#include "stack.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api_token.h"
#include "clock.h"
#include "migrate.h"
#include "cmd_dag.h"
#include "store.h"

/* Unix socket paths are limited to 108 bytes including the NUL. */
#define IPC_PATH_MAX 100

/* Restart backoff: 100 ms doubling to 10 s, back to 100 ms after 60 s up.
 * A child that dies at once (bad config, database gone) must not spin the
 * CPU, and one that crashed after a long healthy run should come back at
 * once: a longer floor delays recovery, a shorter cap floods the log. */
#define BACKOFF_MIN_US (100 * AX_USEC_PER_MSEC)
#define BACKOFF_MAX_US (10 * AX_USEC_PER_SEC)
#define HEALTHY_US     (60 * AX_USEC_PER_SEC)

static ax_err
mkdir_p(const char *path)
{
	char   buf[PATH_MAX];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(buf))
		return ax_err_set(AX_EINVAL, "bad directory path '%s'", path);
	memcpy(buf, path, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		char c = buf[i];
		buf[i] = '\0';
		if (mkdir(buf, 0755) != 0 && errno != EEXIST)
			return ax_err_set(errno == EACCES ? AX_EPERM : AX_EIO,
			                  "cannot create directory %s: %s",
			                  buf, strerror(errno));
		buf[i] = c;
	}
	return AX_OK;
}

int
ax_stack_free_port(void)
{
	struct sockaddr_in a;
	socklen_t          len  = sizeof(a);
	int                fd   = socket(AF_INET, SOCK_STREAM, 0);
	int                port = -1;

	if (fd < 0)
		return -1;
	memset(&a, 0, sizeof(a));
	a.sin_family      = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *) &a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *) &a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/* Writes s as a YAML double-quoted scalar. */
static void
yaml_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s != '\0'; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

static ax_err
write_config(ax_stack *st, const ax_stack_opts *o)
{
	char  events[PATH_MAX + 32], tmp[PATH_MAX + 32], tasks[PATH_MAX + 32];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", st->config);
	if ((f = fopen(tmp, "w")) == NULL)
		return ax_err_set(AX_EIO, "cannot write %s: %s", tmp,
		                  strerror(errno));
	snprintf(events, sizeof(events), "ipc://%s/run/events.ipc", st->home);
	if (strlen(events) > IPC_PATH_MAX + 6)
		snprintf(events, sizeof(events), "tcp://127.0.0.1:%d",
		         ax_stack_free_port());
	fprintf(f,
	        "# Written by axctl for the daemons of this home; "
	        "rewritten at every start.\nhome: ");
	yaml_str(f, st->home);
	fprintf(f, "\nlog:\n  level: %s\ndatabase:\n  dsn: ",
	        o->log_level != NULL ? o->log_level : "info");
	yaml_str(f, st->dsn);
	fprintf(f, "\nqueue:\n  address: ");
	yaml_str(f, st->queue_addr);
	fprintf(f, "\nworker:\n  server: ");
	yaml_str(f, st->queue_addr);
	fprintf(f, "\n  log_dir: ");
	snprintf(tasks, sizeof(tasks), "%s/tasks", st->log_dir);
	yaml_str(f, tasks);
	if (o->worker_slots > 0)
		fprintf(f, "\n  slots: %d", o->worker_slots);
	if (o->worker_run_as != NULL) {
		fprintf(f, "\n  run_as: ");
		yaml_str(f, o->worker_run_as);
	}
	fprintf(f, "\nevents:\n  pub: ");
	yaml_str(f, events);
	if (o->api_port > 0)
		fprintf(f, "\napi:\n  port: %d", o->api_port);
	fprintf(f, "\n");
	if (o->extra_yaml != NULL)
		fprintf(f, "%s\n", o->extra_yaml);
	if (fclose(f) != 0 || rename(tmp, st->config) != 0)
		return ax_err_set(AX_EIO, "cannot write %s: %s", st->config,
		                  strerror(errno));
	return AX_OK;
}

ax_err
ax_stack_init(ax_stack *st, const ax_stack_opts *o)
{
	char   sub[PATH_MAX + 32];
	ax_err rv;

	memset(st, 0, sizeof(*st));
	if (o->home == NULL || o->home[0] == '\0' || o->dsn == NULL)
		return ax_err_set(AX_EINVAL, "a home and a DSN are required");
	if (o->workers < 0 || o->workers > AX_STACK_MAX_WORKERS)
		return ax_err_set(AX_EINVAL,
		                  "workers must be between 0 and %d, not %d",
		                  AX_STACK_MAX_WORKERS, o->workers);
	if ((rv = mkdir_p(o->home)) != AX_OK)
		return rv;
	if (realpath(o->home, st->home) == NULL)
		return ax_err_set(AX_EIO, "cannot resolve %s: %s", o->home,
		                  strerror(errno));
	snprintf(st->config, sizeof(st->config), "%s/ax.yaml", st->home);
	snprintf(st->log_dir, sizeof(st->log_dir), "%s/logs", st->home);
	snprintf(sub, sizeof(sub), "%s/tasks", st->log_dir);
	if ((rv = mkdir_p(sub)) != AX_OK)
		return rv;
	snprintf(sub, sizeof(sub), "%s/run", st->home);
	if ((rv = mkdir_p(sub)) != AX_OK)
		return rv;
	snprintf(st->queue_addr, sizeof(st->queue_addr),
	         "ipc://%s/run/queue.ipc", st->home);
	if (strlen(st->queue_addr) > IPC_PATH_MAX + 6) {
		int port = ax_stack_free_port();
		if (port <= 0)
			return ax_err_set(AX_EIO,
			                  "no free TCP port for the queue: %s",
			                  strerror(errno));
		snprintf(st->queue_addr, sizeof(st->queue_addr),
		         "tcp://127.0.0.1:%d", port);
	}
	if ((st->dsn = strdup(o->dsn)) == NULL)
		return ax_err_set(AX_ENOMEM, "out of memory");
	st->n_workers = o->workers;
	return write_config(st, o);
}

/* One int64 from a one-row query; -1 on any failure. */
static int64_t
query_i64(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	int64_t   v = -1;
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
	    !PQgetisnull(r, 0, 0))
		v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return v;
}

static ax_err
start_child(ax_proc *p, const char *name, const char *bin_name,
            const ax_stack *st, const char *const *env)
{
	char         bin[PATH_MAX], log[PATH_MAX + 128];
	ax_proc_opts opts = { .env = env, .pdeathsig = SIGTERM };
	ax_err       rv;

	if ((rv = ax_proc_find_bin(bin_name, bin, sizeof(bin))) != AX_OK)
		return rv;
	snprintf(log, sizeof(log), "%s/%s.log", st->log_dir, name);
	char *argv[] = { (char *) bin_name, "--config", (char *) st->config,
		         NULL };
	return ax_proc_start(p, name, bin, argv, log, &opts);
}

/* Fails with the end of p's log after an exit during start-up. */
static ax_err
died(const ax_proc *p)
{
	char how[96], tail[2048];
	return ax_err_set(
	    AX_ECLOSED, "%s %s during start-up; end of %s:\n%s", p->name,
	    ax_proc_describe(p, how, sizeof(how)), p->log_path,
	    ax_proc_log_tail(p->log_path, 15, tail, sizeof(tail)));
}

ax_err
ax_stack_start_axd(ax_stack *st, int64_t timeout_us)
{
	PGconn *c = PQconnectdb(st->dsn);
	int64_t before, deadline;
	ax_err  rv;

	if (PQstatus(c) != CONNECTION_OK) {
		rv = ax_err_set(AX_EDBCONN,
		                "cannot connect to the database: %s",
		                PQerrorMessage(c));
		PQfinish(c);
		return rv;
	}
	before = query_i64(c, "SELECT epoch FROM scheduler_lease");
	if ((rv = start_child(&st->axd, "axd", "axd", st, NULL)) != AX_OK) {
		PQfinish(c);
		return rv;
	}
	deadline = ax_clock_mono_us() + timeout_us;
	for (;;) {
		char sql[160];
		snprintf(sql, sizeof(sql),
		         "SELECT count(*) FROM scheduler_lease WHERE epoch > "
		         "%lld AND expires_at > now()",
		         (long long) before);
		if (query_i64(c, sql) > 0)
			break;
		if (PQstatus(c) != CONNECTION_OK)
			PQreset(c);
		if (!ax_proc_poll(&st->axd)) {
			PQfinish(c);
			return died(&st->axd);
		}
		if (ax_clock_mono_us() > deadline) {
			PQfinish(c);
			ax_proc_stop(&st->axd, 5 * AX_USEC_PER_SEC);
			return ax_err_set(
			    AX_ETIMEDOUT,
			    "axd did not take the scheduler lease "
			    "within %lld s; see %s",
			    (long long) (timeout_us / AX_USEC_PER_SEC),
			    st->axd.log_path);
		}
		ax_clock_sleep_us(50000);
	}
	PQfinish(c);
	return AX_OK;
}

ax_err
ax_stack_start_standby(ax_stack *st)
{
	return start_child(&st->standby, "axd-standby", "axd", st, NULL);
}

ax_err
ax_stack_start_worker(ax_stack *st, int i)
{
	char        name[32], id[48], group[96];
	const char *env[] = { id, NULL, NULL };

	if (i < 0 || i >= st->n_workers)
		return ax_err_set(AX_EINVAL, "no worker %d (have %d)", i + 1,
		                  st->n_workers);
	snprintf(name, sizeof(name), "worker-%d", i + 1);
	snprintf(id, sizeof(id), "AX_WORKER_ID=standalone-%d", i + 1);
	if (st->groups[i][0] != '\0') {
		snprintf(group, sizeof(group), "AX_WORKER_GROUP=%s",
		         st->groups[i]);
		env[1] = group;
	}
	return start_child(&st->workers[i], name, "ax-worker", st, env);
}

ax_err
ax_stack_start_workers(ax_stack *st)
{
	ax_err rv;
	for (int i = 0; i < st->n_workers; i++)
		if ((rv = ax_stack_start_worker(st, i)) != AX_OK)
			return rv;
	return AX_OK;
}

ax_err
ax_stack_add_group_worker(ax_stack *st, const char *group)
{
	int i = st->n_workers;

	if (group == NULL || *group == '\0' ||
	    strlen(group) >= sizeof(st->groups[0]))
		return ax_err_set(AX_EINVAL,
		                  "worker group '%s': 1 to %zu "
		                  "characters",
		                  group ? group : "",
		                  sizeof(st->groups[0]) - 1);
	if (i >= AX_STACK_MAX_WORKERS)
		return ax_err_set(AX_ELIMIT, "at most %d workers",
		                  AX_STACK_MAX_WORKERS);
	memset(&st->workers[i], 0, sizeof(st->workers[i]));
	snprintf(st->groups[i], sizeof(st->groups[i]), "%s", group);
	st->n_workers++;
	return ax_stack_start_worker(st, i);
}

ax_err
ax_stack_start_api(ax_stack *st, int *up, char *why, size_t whylen)
{
	char   bin[PATH_MAX], token[PATH_MAX + 16];
	ax_err rv;

	*up        = 0;
	st->api_up = 0;
	if (ax_proc_find_bin("ax-api", bin, sizeof(bin)) != AX_OK) {
		if (why != NULL)
			snprintf(why, whylen, "ax-api is not installed");
		return AX_OK;
	}
	/* The token first: a script that waits for /healthz and then
	 * reads $home/admin.token must find it, so ax-api does not listen
	 * before the file is there (written atomically: rename). */
	if (ax_stack_admin_token(st, token, sizeof(token)) != AX_OK) {
		if (why != NULL)
			snprintf(
			    why, whylen,
			    "no admin token, so ax-api is not started: %s",
			    ax_err_detail());
		return AX_OK;
	}
	if ((rv = start_child(&st->api, "ax-api", "ax-api", st, NULL)) !=
	    AX_OK)
		return rv;
	if (ax_proc_wait(&st->api, AX_USEC_PER_SEC) == AX_OK) {
		if (why != NULL) {
			char how[96], tail[1024];
			snprintf(why, whylen, "ax-api %s: %s",
			         ax_proc_describe(&st->api, how, sizeof(how)),
			         ax_proc_log_tail(st->api.log_path, 2, tail,
			                          sizeof(tail)));
		}
		return AX_OK;
	}
	*up = st->api_up = 1;
	return AX_OK;
}

ax_proc *
ax_stack_check(ax_stack *st)
{
	if (st->axd.pid != 0 && !st->axd.stopping && !ax_proc_poll(&st->axd))
		return &st->axd;
	for (int i = 0; i < st->n_workers; i++) {
		ax_proc *w = &st->workers[i];
		if (w->pid != 0 && !w->stopping && !ax_proc_poll(w))
			return w;
	}
	if (st->api_up && !st->api.stopping && !ax_proc_poll(&st->api))
		return &st->api;
	return NULL;
}

ax_err
ax_stack_admin_token(const ax_stack *st, char *path, size_t len)
{
	ax_store *s;
	ax_err    rv;

	snprintf(path, len, "%s/admin.token", st->home);
	if (access(path, R_OK) == 0)
		return AX_OK;
	if ((rv = ax_store_open(st->dsn, &s)) != AX_OK)
		return rv;
	rv = ax_api_token_write_admin(s, st->home, path, len);
	ax_store_close(s);
	return rv;
}

ax_err
ax_stack_home_open(ax_stack_home *h, const char *home, const char *prefix)
{
	int    applied;
	ax_err rv;

	memset(h, 0, sizeof(*h));
	if (home != NULL) {
		snprintf(h->home, sizeof(h->home), "%s", home);
		if ((rv = mkdir_p(h->home)) != AX_OK)
			return rv;
	} else {
		snprintf(h->home, sizeof(h->home), "/tmp/ax-%s-XXXXXX",
		         prefix);
		if (mkdtemp(h->home) == NULL)
			return ax_err_set(AX_EIO,
			                  "cannot make a temp home %s: %s",
			                  h->home, strerror(errno));
		chmod(h->home, 0755);
		h->temp = 1;
	}
	unsetenv("AX_DSN");
	if ((rv = ax_db_where_init(&h->w, h->home, NULL)) != AX_OK ||
	    (rv = ax_db_where_up(&h->w)) != AX_OK ||
	    (rv = ax_migrate_run(h->w.dsn, &applied)) != AX_OK)
		return rv;
	return AX_OK;
}

void
ax_stack_home_close(ax_stack_home *h)
{
	char cmd[PATH_MAX + 16];

	if (h->w.embed != NULL && ax_pg_embed_down(h->w.embed) != AX_OK)
		fprintf(stderr, "cannot stop PostgreSQL of %s: %s\n", h->home,
		        ax_err_detail());
	ax_db_where_fini(&h->w);
	if (!h->temp)
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", h->home);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", h->home);
	h->temp = 0;
}

int
ax_stack_load_dags(const char *dir, const char *dsn)
{
	int saved = dup(1), devnull = open("/dev/null", O_WRONLY), rc;

	fflush(stdout);
	if (saved >= 0 && devnull >= 0)
		dup2(devnull, 1);
	rc = ax_dag_load_dir(dir, NULL, dsn);
	fflush(stdout);
	if (saved >= 0) {
		dup2(saved, 1);
		close(saved);
	}
	if (devnull >= 0)
		close(devnull);
	return rc;
}

ax_proc *
ax_stack_child(ax_stack *st, int k)
{
	if (k == AX_STACK_AXD)
		return &st->axd;
	if (k == AX_STACK_STANDBY)
		return &st->standby;
	if (k == AX_STACK_API)
		return &st->api;
	if (k >= AX_STACK_WORKER0 && k < AX_STACK_WORKER0 + st->n_workers)
		return &st->workers[k - AX_STACK_WORKER0];
	return NULL;
}

/* Starts child k again, the way it was started first. */
static ax_err
restart(ax_stack *st, int k)
{
	if (k == AX_STACK_AXD)
		return start_child(&st->axd, "axd", "axd", st, NULL);
	if (k == AX_STACK_STANDBY)
		return ax_stack_start_standby(st);
	if (k == AX_STACK_API)
		return start_child(&st->api, "ax-api", "ax-api", st, NULL);
	return ax_stack_start_worker(st, k - AX_STACK_WORKER0);
}

int64_t
ax_stack_next_backoff(const ax_stack_sup *sup, int64_t now)
{
	if (sup->backoff_us == 0 || now - sup->up_us >= HEALTHY_US)
		return BACKOFF_MIN_US;
	return sup->backoff_us * 2 > BACKOFF_MAX_US ? BACKOFF_MAX_US
	                                            : sup->backoff_us * 2;
}

static void
report(FILE *log, const char *prefix, const ax_proc *p,
       const ax_stack_sup *sup)
{
	char how[96], tail[2048];

	if (log == NULL)
		return;
	fprintf(log,
	        "%s%s (pid %d) %s unexpectedly; restarting it in %lld ms "
	        "(restart %d); end of %s:\n%s",
	        prefix, p->name, (int) p->pid,
	        ax_proc_describe(p, how, sizeof(how)),
	        (long long) (sup->backoff_us / AX_USEC_PER_MSEC),
	        sup->restarts + 1, p->log_path,
	        ax_proc_log_tail(p->log_path, 5, tail, sizeof(tail)));
	if (tail[0] != '\0' && tail[strlen(tail) - 1] != '\n')
		fputc('\n', log);
	fflush(log);
}

int
ax_stack_supervise(ax_stack *st, FILE *log, const char *prefix)
{
	int64_t now = ax_clock_mono_us();
	int     n   = 0;

	for (int k = 0; k < AX_STACK_WORKER0 + st->n_workers; k++) {
		ax_proc      *p   = ax_stack_child(st, k);
		ax_stack_sup *sup = &st->sup[k];

		if (p->pid == 0 || (k == AX_STACK_API && !st->api_up))
			continue;
		if (sup->restart_at == 0) {
			if (p->pid != sup->pid) { /* started by the caller */
				sup->pid   = p->pid;
				sup->up_us = now;
			}
			if (p->stopping || ax_proc_poll(p))
				continue;
			sup->backoff_us = ax_stack_next_backoff(sup, now);
			sup->restart_at = now + sup->backoff_us;
			report(log, prefix, p, sup);
			continue;
		}
		if (now < sup->restart_at)
			continue;
		sup->restart_at = 0;
		sup->restarts++;
		if (restart(st, k) != AX_OK) {
			sup->backoff_us = ax_stack_next_backoff(sup, now);
			sup->restart_at = now + sup->backoff_us;
			if (log != NULL)
				fprintf(
				    log,
				    "%scannot restart %s: %s; trying again "
				    "in %lld ms\n",
				    prefix, p->name, ax_err_detail(),
				    (long long) (sup->backoff_us /
				                 AX_USEC_PER_MSEC));
			continue;
		}
		sup->pid   = p->pid;
		sup->up_us = now;
		n++;
		if (log != NULL)
			fprintf(log, "%s%s restarted (pid %d)\n", prefix,
			        p->name, (int) p->pid);
	}
	if (log != NULL)
		fflush(log);
	return n;
}

void
ax_stack_stop(ax_stack *st, int64_t grace_us)
{
	int64_t deadline;

	ax_proc_stop(&st->api, grace_us);
	/* Workers drain in parallel: one grace period for all of them. */
	for (int i = 0; i < st->n_workers; i++)
		if (ax_proc_poll(&st->workers[i])) {
			st->workers[i].stopping = 1;
			ax_proc_signal(&st->workers[i], SIGTERM);
		}
	deadline = ax_clock_mono_us() + grace_us;
	for (int i = 0; i < st->n_workers; i++) {
		int64_t left = deadline - ax_clock_mono_us();
		ax_proc_wait(&st->workers[i], left > 0 ? left : 0);
		ax_proc_stop(&st->workers[i], 0);
	}
	ax_proc_stop(&st->standby, grace_us);
	ax_proc_stop(&st->axd, grace_us);
	/* Nothing stopped here is restarted by a later supervision pass. */
	for (int k = 0; k < AX_STACK_CHILDREN; k++)
		st->sup[k].restart_at = 0;
}

void
ax_stack_fini(ax_stack *st)
{
	free(st->dsn);
	st->dsn = NULL;
}
