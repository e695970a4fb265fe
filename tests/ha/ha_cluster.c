/*
 * ha_cluster.c - etcd + two Patroni nodes of PostgreSQL 15 for the `ha`
 * suite. See ha_cluster.h for the contract.
 *
 * Role: writes one Patroni config per node (etcd3 DCS, TTL 8 s, loop 1 s,
 * synchronous mode, pg_rewind, fsync off: a SIGKILL keeps the page cache,
 * so the drills lose nothing to it), starts the daemons as children of
 * the test process and watches PostgreSQL itself (pg_is_in_recovery,
 * pg_stat_replication) rather than Patroni's view, since the primary that
 * libpq finds is what AX sees.
 *
 * Invariants: the directory holds an `owner` file (the test's pid) and a
 * `pids` file (every daemon started); the sweep of a dead owner's
 * directory kills only processes whose command line names that
 * directory. Children are started from a prepared argv/envp (execve), so
 * the forked child calls nothing but system calls before exec.
 *
 * Workload: one cluster per test, a handful of children.
 */
#include "ha_cluster.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <limits.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "fs.h"
#include "proc_watch.h"
#include "migrate.h"
#include "proc.h"

#define PGBIN       "/usr/lib/postgresql/15/bin"
#define DIR_PATTERN "/tmp/ax-ha-XXXXXX"
#define DIR_GLOB    "/tmp/ax-ha-*/owner"
#define AX_PASSWORD "ax-ha-secret"
#define START_US    (120 * AX_USEC_PER_SEC)
#define FAILOVER_US (60 * AX_USEC_PER_SEC)
#define STOP_US     (30 * AX_USEC_PER_SEC)
#define LOG_LINES   25
#define ENV_MAX     256

extern char **environ;

typedef struct node {
	char  name[8];     /* Patroni member name: n1, n2 */
	char  dir[96];     /* $dir/n1, owned by the server's user */
	char  config[128]; /* $dir/n1/patroni.yml */
	char  log[128];    /* $dir/n1/patroni.log (Patroni's own log) */
	char  out[128];    /* $dir/n1/patroni.out (stdout, stderr) */
	int   pg_port;
	int   api_port; /* Patroni REST API */
	pid_t patroni;  /* 0 when not running */
} node;

struct ax_ha_cluster {
	char  dir[64]; /* /tmp/ax-ha-XXXXXX */
	char  etcd_log[96];
	char  patroni[PATH_MAX]; /* executables, found on PATH */
	char  patronictl[PATH_MAX];
	char  etcd_bin[PATH_MAX];
	int   etcd_port, etcd_peer_port;
	pid_t etcd;
	uid_t uid; /* the server's user: postgres as root, else us */
	gid_t gid;
	node  n[AX_HA_NODES];
	char  dsn[512];
};

/* ---- files and processes ------------------------------------------------ */

static void
rm_rf(const char *path)
{
	(void) ax_fs_rm_rf(path);
}

static ax_err
write_file(const char *path, const char *text, uid_t uid, gid_t gid)
{
	FILE *f = fopen(path, "we");
	if (f == NULL)
		return ax_err_set(AX_EIO, "cannot write %s: %s", path,
		                  strerror(errno));
	fputs(text, f);
	if (fclose(f) != 0)
		return ax_err_set(AX_EIO, "cannot write %s: %s", path,
		                  strerror(errno));
	if (geteuid() == 0 && chown(path, uid, gid) != 0)
		return ax_err_set(AX_EIO, "chown %s: %s", path,
		                  strerror(errno));
	return AX_OK;
}

static void
append_pid(const ax_ha_cluster *c, pid_t pid)
{
	char  path[96];
	FILE *f;
	snprintf(path, sizeof(path), "%s/pids", c->dir);
	if ((f = fopen(path, "ae")) != NULL) {
		fprintf(f, "%ld\n", (long) pid);
		fclose(f);
	}
}

/* Finds name on $PATH (absolute path into buf). AX_ENOENT with the
 * package to install otherwise. */
static ax_err
find_exe(const char *name, const char *package, char *buf, size_t len)
{
	const char *path = getenv("PATH");
	char        dirs[4096];

	snprintf(dirs, sizeof(dirs), "%s",
	         path != NULL ? path : "/usr/bin:/bin");
	for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d != NULL;
	     d = strtok_r(NULL, ":", &save)) {
		snprintf(buf, len, "%s/%s", d, name);
		if (access(buf, X_OK) == 0)
			return AX_OK;
	}
	return ax_err_set(AX_ENOENT,
	                  "%s not found on PATH; install it: apt-get install "
	                  "-y %s",
	                  name, package);
}

/* The environment of a child: ours without libpq's and Python's
 * variables (they would redirect Patroni's connections or interpreter),
 * HOME set to home. Strings in out[] point into environ or into homebuf. */
static void
child_env(char **out, size_t cap, char *homebuf, size_t homelen,
          const char *home)
{
	size_t n = 0;
	snprintf(homebuf, homelen, "HOME=%s", home);
	for (char **e = environ; *e != NULL && n + 2 < cap; e++)
		if (strncmp(*e, "PG", 2) != 0 &&
		    strncmp(*e, "PYTHON", 6) != 0 &&
		    strncmp(*e, "HOME=", 5) != 0)
			out[n++] = *e;
	out[n++] = homebuf;
	out[n]   = NULL;
}

/*
 * Starts argv[0] (an absolute path) in its own process group with
 * stdout+stderr appended to log, cwd dir, as the server's user when
 * as_server, SIGTERM as its parent-death signal. *pid set on success.
 */
static ax_err
spawn(ax_ha_cluster *c, char *const argv[], const char *log, const char *dir,
      int as_server, pid_t *pid)
{
	char *envp[ENV_MAX], home[160];
	pid_t parent = getpid(), p;
	int   fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

	if (fd < 0)
		return ax_err_set(AX_EIO, "cannot open %s: %s", log,
		                  strerror(errno));
	if (as_server && geteuid() == 0 && fchown(fd, c->uid, c->gid) != 0) {
		close(fd);
		return ax_err_set(AX_EIO, "chown %s: %s", log,
		                  strerror(errno));
	}
	child_env(envp, ENV_MAX, home, sizeof(home), dir);
	if ((p = fork()) < 0) {
		close(fd);
		return ax_err_set(AX_EIO, "fork: %s", strerror(errno));
	}
	if (p == 0) {
		sigset_t none;
		int      devnull = open("/dev/null", O_RDONLY);
		setpgid(0, 0);
		if (devnull >= 0)
			dup2(devnull, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (as_server && geteuid() == 0 &&
		    (setgroups(1, &c->gid) != 0 || setgid(c->gid) != 0 ||
		     setuid(c->uid) != 0))
			_exit(126);
		/* after setuid: a change of credentials clears it */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(125);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		if (chdir(dir) != 0)
			_exit(124);
		execve(argv[0], argv, envp);
		_exit(127);
	}
	close(fd);
	append_pid(c, p);
	*pid = p;
	return AX_OK;
}

/* Reaps pid if it has exited: 1 while it runs, 0 once gone. */
static int
alive(pid_t *pid)
{
	int st;
	if (*pid <= 0)
		return 0;
	if (waitpid(*pid, &st, WNOHANG) == *pid) {
		*pid = 0;
		return 0;
	}
	return 1;
}

/* SIGTERM, wait up to grace_us, then SIGKILL and reap. */
static void
terminate(pid_t *pid, int64_t grace_us)
{
	int64_t deadline = ax_clock_mono_us() + grace_us;
	if (!alive(pid))
		return;
	kill(*pid, SIGTERM);
	while (alive(pid) && ax_clock_mono_us() < deadline)
		ax_clock_sleep_us(50 * AX_USEC_PER_MSEC);
	if (*pid > 0) {
		kill(-*pid, SIGKILL);
		kill(*pid, SIGKILL);
		waitpid(*pid, NULL, 0);
		*pid = 0;
	}
}

/* Whether /proc/pid/cmdline mentions needle (a directory path). */
static int
cmdline_has(pid_t pid, const char *needle)
{
	char   path[64], buf[4096];
	size_t n;
	FILE  *f;

	snprintf(path, sizeof(path), "/proc/%ld/cmdline", (long) pid);
	if ((f = fopen(path, "re")) == NULL)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	for (size_t i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	buf[n] = '\0';
	return strstr(buf, needle) != NULL;
}

/* The postmaster pid of a data directory (postmaster.pid), or 0. */
static pid_t
postmaster_of(const char *datadir)
{
	char  path[160];
	long  pid = 0;
	FILE *f;
	snprintf(path, sizeof(path), "%s/postmaster.pid", datadir);
	if ((f = fopen(path, "re")) == NULL)
		return 0;
	if (fscanf(f, "%ld", &pid) != 1)
		pid = 0;
	fclose(f);
	return (pid_t) pid;
}

/* SIGKILL to the postmaster of node dir and its process group (Patroni
 * starts it in a session of its own), when it still runs from there. */
static void
kill_postmaster(const char *nodedir)
{
	char  data[128];
	pid_t pm;
	snprintf(data, sizeof(data), "%s/data", nodedir);
	if ((pm = postmaster_of(data)) > 0 && cmdline_has(pm, nodedir)) {
		kill(-pm, SIGKILL);
		kill(pm, SIGKILL);
	}
}

/* Kills what a dead test left in its directory dir and removes it. */
static void
sweep_dir(const char *dir)
{
	char  path[PATH_MAX + 16];
	long  pid;
	FILE *f;

	snprintf(path, sizeof(path), "%s/pids", dir);
	if ((f = fopen(path, "re")) != NULL) {
		while (fscanf(f, "%ld", &pid) == 1)
			if (pid > 0 && cmdline_has((pid_t) pid, dir))
				kill((pid_t) pid, SIGKILL);
		fclose(f);
	}
	for (int i = 1; i <= AX_HA_NODES; i++) {
		snprintf(path, sizeof(path), "%s/n%d", dir, i);
		kill_postmaster(path);
	}
	rm_rf(dir);
}

/* A free TCP port on 127.0.0.1 (the kernel's choice), distinct from the
 * n ports in used[]; -1 on error. */
static int
free_port(const int *used, int n)
{
	for (int tries = 0; tries < 20; tries++) {
		struct sockaddr_in a   = { .sin_family = AF_INET };
		socklen_t          len = sizeof(a);
		int                fd  = socket(AF_INET, SOCK_STREAM, 0), port;
		if (fd < 0)
			return -1;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (bind(fd, (struct sockaddr *) &a, sizeof(a)) != 0 ||
		    getsockname(fd, (struct sockaddr *) &a, &len) != 0) {
			close(fd);
			return -1;
		}
		close(fd);
		port    = ntohs(a.sin_port);
		int dup = 0;
		for (int i = 0; i < n; i++)
			dup |= used[i] == port;
		if (!dup)
			return port;
	}
	return -1;
}

int
ax_ha_free_port(void)
{
	return free_port(NULL, 0);
}

/* Whether something accepts TCP connections on 127.0.0.1:port. */
static int
port_open(int port)
{
	struct sockaddr_in a  = { .sin_family = AF_INET };
	int                fd = socket(AF_INET, SOCK_STREAM, 0), ok;
	if (fd < 0)
		return 0;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port        = htons((uint16_t) port);
	ok = connect(fd, (struct sockaddr *) &a, sizeof(a)) == 0;
	close(fd);
	return ok;
}

/* Appends the end of log to detail buffer d (cap bytes). */
static void
add_tail(char *d, size_t cap, const char *log, int lines)
{
	char   tail[2048];
	size_t n = strlen(d);
	if (n + 1 < cap)
		snprintf(d + n, cap - n, "\n---- end of %s ----\n%s", log,
		         ax_proc_log_tail(log, lines, tail, sizeof(tail)));
}

/* ---- configuration ----------------------------------------------------- */

/* Node i's Patroni configuration (see the file comment for the choices;
 * docs/operations.md explains them for production). */
static void
node_config(const ax_ha_cluster *c, int i, char *buf, size_t len)
{
	const node *n = &c->n[i];
	snprintf(
	    buf, len,
	    "scope: ax-ha\n"
	    "name: %s\n"
	    "log: {level: INFO, dir: %s}\n"
	    "restapi: {listen: '127.0.0.1:%d', connect_address: "
	    "'127.0.0.1:%d'}\n"
	    "etcd3: {hosts: '127.0.0.1:%d'}\n"
	    "bootstrap:\n"
	    "  dcs:\n"
	    "    ttl: 8\n"
	    "    loop_wait: 1\n"
	    "    retry_timeout: 3\n"
	    "    maximum_lag_on_failover: 1048576\n"
	    "    synchronous_mode: true\n"
	    "    postgresql:\n"
	    "      use_pg_rewind: true\n"
	    "      use_slots: true\n"
	    "      parameters:\n"
	    "        wal_level: replica\n"
	    "        hot_standby: 'on'\n"
	    "        wal_log_hints: 'on'\n"
	    "        max_wal_senders: 5\n"
	    "        max_replication_slots: 5\n"
	    "        max_connections: 200\n"
	    "        fsync: 'off'\n"
	    "        shared_buffers: 32MB\n"
	    "  initdb: [{encoding: UTF8}, {locale: C}]\n"
	    "  pg_hba:\n"
	    "    - local all all trust\n"
	    "    - host replication replicator 127.0.0.1/32 trust\n"
	    "    - host all ax 127.0.0.1/32 scram-sha-256\n"
	    "    - host all all 127.0.0.1/32 trust\n"
	    "postgresql:\n"
	    "  listen: '127.0.0.1:%d'\n"
	    "  connect_address: '127.0.0.1:%d'\n"
	    "  data_dir: %s/data\n"
	    "  bin_dir: " PGBIN "\n"
	    "  pgpass: %s/pgpass\n"
	    "  authentication:\n"
	    "    superuser: {username: postgres, password: postgres-secret}\n"
	    "    replication: {username: replicator, password: repl-secret}\n"
	    "    rewind: {username: rewinder, password: rewind-secret}\n"
	    "  parameters: {unix_socket_directories: '%s'}\n",
	    n->name, n->dir, n->api_port, n->api_port, c->etcd_port,
	    n->pg_port, n->pg_port, n->dir, n->dir, n->dir);
}

static ax_err
pick_ports(ax_ha_cluster *c)
{
	int used[2 + 2 * AX_HA_NODES], k = 0;
	for (int i = 0; i < 2 + 2 * AX_HA_NODES; i++) {
		if ((used[k] = free_port(used, k)) < 0)
			return ax_err_set(AX_EIO,
			                  "no free port on 127.0.0.1: %s",
			                  strerror(errno));
		k++;
	}
	c->etcd_port      = used[0];
	c->etcd_peer_port = used[1];
	for (int i = 0; i < AX_HA_NODES; i++) {
		c->n[i].pg_port  = used[2 + 2 * i];
		c->n[i].api_port = used[3 + 2 * i];
	}
	return AX_OK;
}

static ax_err
prepare_dirs(ax_ha_cluster *c)
{
	char   text[4096], owner[96];
	ax_err rv;

	snprintf(c->dir, sizeof(c->dir), DIR_PATTERN);
	if (mkdtemp(c->dir) == NULL) {
		c->dir[0] = '\0';
		return ax_err_set(AX_EIO, "mkdtemp " DIR_PATTERN ": %s",
		                  strerror(errno));
	}
	if (chmod(c->dir, 0711) != 0)
		return ax_err_set(AX_EIO, "chmod %s: %s", c->dir,
		                  strerror(errno));
	snprintf(owner, sizeof(owner), "%s/owner", c->dir);
	snprintf(text, sizeof(text), "%ld\n", (long) getpid());
	if ((rv = write_file(owner, text, 0, 0)) != AX_OK)
		return rv;
	snprintf(c->etcd_log, sizeof(c->etcd_log), "%s/etcd.log", c->dir);
	for (int i = 0; i < AX_HA_NODES; i++) {
		node *n = &c->n[i];
		snprintf(n->name, sizeof(n->name), "n%d", i + 1);
		snprintf(n->dir, sizeof(n->dir), "%s/%s", c->dir, n->name);
		snprintf(n->config, sizeof(n->config), "%s/patroni.yml",
		         n->dir);
		snprintf(n->log, sizeof(n->log), "%s/patroni.log", n->dir);
		snprintf(n->out, sizeof(n->out), "%s/patroni.out", n->dir);
		if (mkdir(n->dir, 0700) != 0 ||
		    (geteuid() == 0 && chown(n->dir, c->uid, c->gid) != 0))
			return ax_err_set(AX_EIO, "mkdir %s: %s", n->dir,
			                  strerror(errno));
		node_config(c, i, text, sizeof(text));
		if ((rv = write_file(n->config, text, c->uid, c->gid)) !=
		    AX_OK)
			return rv;
	}
	return AX_OK;
}

/* The server's user: `postgres` as root (PostgreSQL refuses root). */
static ax_err
server_user(ax_ha_cluster *c)
{
	struct passwd *pw;
	c->uid = geteuid();
	c->gid = getegid();
	if (c->uid != 0)
		return AX_OK;
	if ((pw = getpwnam("postgres")) == NULL)
		return ax_err_set(
		    AX_ENOENT,
		    "running as root and there is no `postgres` "
		    "user for PostgreSQL; install postgresql-15");
	c->uid = pw->pw_uid;
	c->gid = pw->pw_gid;
	return AX_OK;
}

/* ---- PostgreSQL as seen by libpq --------------------------------------- */

/* Connects to node i's database postgres as the superuser. */
static PGconn *
node_conn(const ax_ha_cluster *c, int i)
{
	char dsn[160];
	snprintf(dsn, sizeof(dsn),
	         "host=127.0.0.1 port=%d dbname=postgres user=postgres "
	         "connect_timeout=2",
	         c->n[i].pg_port);
	PGconn *db = PQconnectdb(dsn);
	if (PQstatus(db) != CONNECTION_OK) {
		PQfinish(db);
		return NULL;
	}
	return db;
}

/* The first value of sql's first row as an integer ('t'/'f' as 1/0);
 * -1 on error or no row. */
static long
query_int(PGconn *db, const char *sql)
{
	PGresult *r = PQexec(db, sql);
	long      v = -1;
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 &&
	    !PQgetisnull(r, 0, 0)) {
		const char *s = PQgetvalue(r, 0, 0);
		v = s[0] == 't' ? 1 : s[0] == 'f' ? 0 : strtol(s, NULL, 10);
	}
	PQclear(r);
	return v;
}

/* 1 primary, 0 replica, -1 down or unreachable. */
static int
node_role(const ax_ha_cluster *c, int i)
{
	PGconn *db = node_conn(c, i);
	long    v;
	if (db == NULL)
		return -1;
	v = query_int(db, "SELECT NOT pg_is_in_recovery()");
	PQfinish(db);
	return v < 0 ? -1 : (int) v;
}

int
ax_ha_primary(ax_ha_cluster *c)
{
	int found = -1;
	for (int i = 0; i < AX_HA_NODES; i++)
		if (node_role(c, i) == 1) {
			if (found >= 0)
				return -1; /* two primaries: none to trust */
			found = i;
		}
	return found;
}

/* Whether the primary p has a synchronous standby streaming from it. */
static int
has_sync_standby(const ax_ha_cluster *c, int p)
{
	PGconn *db = node_conn(c, p);
	long    v;
	if (db == NULL)
		return 0;
	v = query_int(db,
	              "SELECT count(*) FROM pg_stat_replication WHERE "
	              "state = 'streaming' AND sync_state IN ('sync', "
	              "'quorum')");
	PQfinish(db);
	return v > 0;
}

/* AX_ECLOSED with the logs when a daemon that should run has exited. */
static ax_err
check_daemons(ax_ha_cluster *c)
{
	char d[8192] = "";
	if (!alive(&c->etcd)) {
		snprintf(d, sizeof(d), "etcd exited");
		add_tail(d, sizeof(d), c->etcd_log, LOG_LINES);
		return ax_err_set(AX_ECLOSED, "%s", d);
	}
	return AX_OK;
}

ax_err
ax_ha_wait(ax_ha_cluster *c, int want_sync, int64_t timeout_us, int *primary)
{
	int64_t deadline = ax_clock_mono_us() + timeout_us;
	int     p        = -1;
	ax_err  rv;

	for (;;) {
		if ((rv = check_daemons(c)) != AX_OK)
			return rv;
		p = ax_ha_primary(c);
		if (p >= 0 && (!want_sync || has_sync_standby(c, p)))
			break;
		if (ax_clock_mono_us() > deadline) {
			char d[8192];
			snprintf(d, sizeof(d), "after %.0f s: %s",
			         (double) timeout_us / 1e6,
			         p < 0 ? "no node is a writable primary"
			               : "the primary has no synchronous "
			                 "streaming standby");
			for (int i = 0; i < AX_HA_NODES; i++)
				add_tail(d, sizeof(d), c->n[i].log, LOG_LINES);
			return ax_err_set(AX_ETIMEDOUT, "%s", d);
		}
		ax_clock_sleep_us(200 * AX_USEC_PER_MSEC);
	}
	if (primary != NULL)
		*primary = p;
	return AX_OK;
}

/* Role and database `ax` on the primary p, then AX's migrations. */
static ax_err
create_ax(ax_ha_cluster *c, int p)
{
	static const char *const sql[] = {
		"CREATE ROLE ax LOGIN PASSWORD '" AX_PASSWORD "'",
		"CREATE DATABASE ax OWNER ax",
	};
	PGconn *db = node_conn(c, p);
	int     applied;

	if (db == NULL)
		return ax_err_set(AX_EDBCONN,
		                  "cannot connect to the primary "
		                  "%s as postgres",
		                  c->n[p].name);
	for (size_t i = 0; i < sizeof(sql) / sizeof(sql[0]); i++) {
		PGresult *r = PQexec(db, sql[i]);
		if (PQresultStatus(r) != PGRES_COMMAND_OK) {
			ax_err rv = ax_err_set(AX_EDB, "%s: %s", sql[i],
			                       PQerrorMessage(db));
			PQclear(r);
			PQfinish(db);
			return rv;
		}
		PQclear(r);
	}
	PQfinish(db);
	return ax_migrate_run(c->dsn, &applied);
}

/* ---- daemons ------------------------------------------------------------ */

static ax_err
start_etcd(ax_ha_cluster *c)
{
	char    data[96], client[48], peer[48], cluster[64];
	int64_t deadline = ax_clock_mono_us() + 30 * AX_USEC_PER_SEC;
	ax_err  rv;

	snprintf(data, sizeof(data), "%s/etcd", c->dir);
	snprintf(client, sizeof(client), "http://127.0.0.1:%d", c->etcd_port);
	snprintf(peer, sizeof(peer), "http://127.0.0.1:%d", c->etcd_peer_port);
	snprintf(cluster, sizeof(cluster), "ax=%s", peer);
	char *argv[] = { c->etcd_bin, "--name",
		         "ax",        "--data-dir",
		         data,        "--listen-client-urls",
		         client,      "--advertise-client-urls",
		         client,      "--listen-peer-urls",
		         peer,        "--initial-advertise-peer-urls",
		         peer,        "--initial-cluster",
		         cluster,     NULL };
	if ((rv = spawn(c, argv, c->etcd_log, c->dir, 0, &c->etcd)) != AX_OK)
		return rv;
	while (!port_open(c->etcd_port)) {
		if ((rv = check_daemons(c)) != AX_OK)
			return rv;
		if (ax_clock_mono_us() > deadline) {
			char d[4096] = "etcd does not accept connections "
			               "within 30 s";
			add_tail(d, sizeof(d), c->etcd_log, LOG_LINES);
			return ax_err_set(AX_ETIMEDOUT, "%s", d);
		}
		ax_clock_sleep_us(50 * AX_USEC_PER_MSEC);
	}
	return AX_OK;
}

static ax_err
start_node(ax_ha_cluster *c, int i)
{
	node *n      = &c->n[i];
	char *argv[] = { c->patroni, n->config, NULL };
	return spawn(c, argv, n->out, n->dir, 1, &n->patroni);
}

/* Waits until node i's PostgreSQL answers at all (bootstrapped). */
static ax_err
wait_node_up(ax_ha_cluster *c, int i, int64_t timeout_us)
{
	int64_t deadline = ax_clock_mono_us() + timeout_us;
	while (node_role(c, i) < 0) {
		if (!alive(&c->n[i].patroni) ||
		    ax_clock_mono_us() > deadline) {
			char d[8192];
			snprintf(d, sizeof(d), "node %s: %s", c->n[i].name,
			         c->n[i].patroni == 0
			             ? "Patroni exited"
			             : "PostgreSQL does not answer in time");
			add_tail(d, sizeof(d), c->n[i].out, LOG_LINES);
			add_tail(d, sizeof(d), c->n[i].log, LOG_LINES);
			return ax_err_set(AX_ETIMEDOUT, "%s", d);
		}
		ax_clock_sleep_us(200 * AX_USEC_PER_MSEC);
	}
	return AX_OK;
}

static ax_err
find_tools(ax_ha_cluster *c)
{
	char   pg[PATH_MAX];
	ax_err rv;
	snprintf(pg, sizeof(pg), "%s/postgres", PGBIN);
	if (access(pg, X_OK) != 0)
		return ax_err_set(AX_ENOENT,
		                  "%s not found; install postgresql-15", pg);
	if ((rv = find_exe("patroni", "patroni", c->patroni,
	                   sizeof(c->patroni))) != AX_OK ||
	    (rv = find_exe("patronictl", "patroni", c->patronictl,
	                   sizeof(c->patronictl))) != AX_OK)
		return rv;
	return find_exe("etcd", "etcd-server", c->etcd_bin,
	                sizeof(c->etcd_bin));
}

static ax_err
start_all(ax_ha_cluster *c)
{
	int    p;
	ax_err rv;

	if ((rv = find_tools(c)) != AX_OK || (rv = server_user(c)) != AX_OK ||
	    (rv = pick_ports(c)) != AX_OK || (rv = prepare_dirs(c)) != AX_OK)
		return rv;
	snprintf(c->dsn, sizeof(c->dsn),
	         "host=127.0.0.1,127.0.0.1 port=%d,%d dbname=ax user=ax "
	         "password=" AX_PASSWORD " target_session_attrs=read-write "
	         "connect_timeout=3 keepalives_idle=5 keepalives_interval=2 "
	         "keepalives_count=3 tcp_user_timeout=10000",
	         c->n[0].pg_port, c->n[1].pg_port);
	if ((rv = start_etcd(c)) != AX_OK)
		return rv;
	/* the first node bootstraps (initdb) alone, so it is the leader;
	 * the second then clones it with pg_basebackup */
	if ((rv = start_node(c, 0)) != AX_OK ||
	    (rv = wait_node_up(c, 0, START_US)) != AX_OK ||
	    (rv = start_node(c, 1)) != AX_OK ||
	    (rv = wait_node_up(c, 1, START_US)) != AX_OK ||
	    (rv = ax_ha_wait(c, 1, START_US, &p)) != AX_OK)
		return rv;
	return create_ax(c, p);
}

ax_err
ax_ha_start(ax_ha_cluster **out)
{
	ax_ha_cluster *c;
	ax_err         rv;
	char           detail[16384];

	*out = NULL;
	ax_test_sweep_orphans(DIR_GLOB, sweep_dir);
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return ax_err_set(AX_ENOMEM, "out of memory");
	if ((rv = start_all(c)) != AX_OK) {
		snprintf(detail, sizeof(detail), "HA cluster: %s",
		         ax_err_detail());
		ax_ha_stop(c);
		return ax_err_set(rv, "%s", detail);
	}
	*out = c;
	return AX_OK;
}

const char *
ax_ha_dsn(const ax_ha_cluster *c)
{
	return c->dsn;
}

const char *
ax_ha_dir(const ax_ha_cluster *c)
{
	return c->dir;
}

const char *
ax_ha_node_name(const ax_ha_cluster *c, int i)
{
	return c->n[i].name;
}

int
ax_ha_node_port(const ax_ha_cluster *c, int i)
{
	return c->n[i].pg_port;
}

/* ---- faults ------------------------------------------------------------- */

/* Runs patronictl with args (NULL-ended, at most 8) and waits for it
 * (60 s); its output goes to $dir/patronictl.log. */
static ax_err
patronictl(ax_ha_cluster *c, const char *const *args)
{
	char       *argv[12], log[96];
	const char *what     = args[0];
	size_t      k        = 0;
	int64_t     deadline = ax_clock_mono_us() + 60 * AX_USEC_PER_SEC;
	pid_t       pid;
	int         st = 0;
	ax_err      rv;

	argv[k++] = c->patronictl;
	argv[k++] = "-c";
	argv[k++] = c->n[0].config;
	for (; *args != NULL && k < 11; args++)
		argv[k++] = (char *) *args;
	argv[k] = NULL;
	snprintf(log, sizeof(log), "%s/patronictl.log", c->dir);
	if ((rv = spawn(c, argv, log, c->dir, 0, &pid)) != AX_OK)
		return rv;
	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (ax_clock_mono_us() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			st = -1;
			break;
		}
		ax_clock_sleep_us(50 * AX_USEC_PER_MSEC);
	}
	if (st != 0) {
		char d[4096];
		snprintf(d, sizeof(d), "patronictl %s failed (status %d)",
		         what, st);
		add_tail(d, sizeof(d), log, LOG_LINES);
		return ax_err_set(AX_EIO, "%s", d);
	}
	return AX_OK;
}

ax_err
ax_ha_switchover(ax_ha_cluster *c, int *new_primary)
{
	int    from = ax_ha_primary(c), to, p = -1;
	ax_err rv;

	if (from < 0)
		return ax_err_set(AX_ESTATE, "switchover: no primary now");
	to                       = 1 - from;
	const char *const args[] = {
		"switchover",  "--leader",    c->n[from].name,
		"--candidate", c->n[to].name, "--force",
		NULL
	};
	if ((rv = patronictl(c, args)) != AX_OK)
		return rv;
	if ((rv = ax_ha_wait(c, 0, FAILOVER_US, &p)) != AX_OK)
		return rv;
	if (p != to)
		return ax_err_set(AX_ESTATE,
		                  "switchover: %s is the primary, not %s",
		                  c->n[p].name, c->n[to].name);
	if (new_primary != NULL)
		*new_primary = p;
	return AX_OK;
}

ax_err
ax_ha_kill_node(ax_ha_cluster *c, int i)
{
	node *n = &c->n[i];
	if (n->patroni > 0) {
		kill(n->patroni, SIGKILL);
		waitpid(n->patroni, NULL, 0);
		n->patroni = 0;
	}
	kill_postmaster(n->dir);
	return AX_OK;
}

ax_err
ax_ha_restart_node(ax_ha_cluster *c, int i)
{
	if (alive(&c->n[i].patroni))
		return ax_err_set(AX_ESTATE, "node %s still runs",
		                  c->n[i].name);
	return start_node(c, i);
}

void
ax_ha_dump(ax_ha_cluster *c)
{
	char d[16384] = "";
	add_tail(d, sizeof(d), c->etcd_log, 5);
	for (int i = 0; i < AX_HA_NODES; i++) {
		add_tail(d, sizeof(d), c->n[i].out, LOG_LINES);
		add_tail(d, sizeof(d), c->n[i].log, 5);
	}
	fprintf(stderr, "%s\n", d);
}

void
ax_ha_stop(ax_ha_cluster *c)
{
	int64_t deadline;
	int     left;

	if (c == NULL)
		return;
	/* Patroni stops its PostgreSQL on SIGTERM; both nodes at once */
	for (int i = 0; i < AX_HA_NODES; i++)
		if (alive(&c->n[i].patroni))
			kill(c->n[i].patroni, SIGTERM);
	deadline = ax_clock_mono_us() + STOP_US;
	do {
		left = 0;
		for (int i = 0; i < AX_HA_NODES; i++)
			left += alive(&c->n[i].patroni);
		if (left > 0)
			ax_clock_sleep_us(100 * AX_USEC_PER_MSEC);
	} while (left > 0 && ax_clock_mono_us() < deadline);
	for (int i = 0; i < AX_HA_NODES; i++) {
		terminate(&c->n[i].patroni, 0);
		if (c->dir[0] != '\0')
			kill_postmaster(c->n[i].dir);
	}
	terminate(&c->etcd, 5 * AX_USEC_PER_SEC);
	if (c->dir[0] != '\0')
		rm_rf(c->dir);
	free(c);
}
