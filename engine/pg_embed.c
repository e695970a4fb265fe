/*
 * pg_embed.c - a private PostgreSQL cluster under an AX home directory.
 *
 * Role: initdb, start, stop and probe the cluster that `axctl db`,
 * `axctl standalone` and the test harness use when no DSN is configured.
 * See pg_embed.h for the layout and the contract.
 *
 * Invariants: every child (initdb, postgres, useradd) is started with
 * fork + execv and an argument vector; in the child only async-signal-safe
 * calls run, every inherited descriptor above stderr is closed (so the
 * postmaster never holds the home's lock or a test runner's pipe), and
 * root drops to the server's user before touching the cluster. A cluster
 * is initialised into data.tmp and renamed to data only when initdb and the
 * configuration succeeded, so a crash mid-initdb never leaves a half
 * cluster that looks real.
 *
 * Workload: a few calls per process; the cost is PostgreSQL's own start-up
 * (about 0.3 s) and initdb (about 1-2 s), polled every 20 ms.
 */
#include "pg_embed.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "ax_config.h"
#include "clock.h"
#include "fs.h"
#include "log.h"

#define START_TIMEOUT_US (60 * AX_USEC_PER_SEC)
#define STOP_TIMEOUT_US  (60 * AX_USEC_PER_SEC)
#define KILL_TIMEOUT_US  (10 * AX_USEC_PER_SEC)
#define LOCK_TIMEOUT_US  (120 * AX_USEC_PER_SEC)
#define POLL_US          (20 * AX_USEC_PER_MSEC)
#define TAIL_BYTES       600

/* Exit codes a child uses to say which set-up step failed before exec. */
enum {
	CHILD_EPRIV  = 120, /* setgroups / setgid / setuid */
	CHILD_ECHDIR = 121, /* cannot enter $home/pg as the server's user */
	CHILD_EOPEN  = 122, /* cannot open the output log */
	CHILD_EEXEC  = 127, /* execv failed */
};

struct ax_pg_embed {
	char *home;      /* absolute */
	char *pgbin;     /* directory of initdb and postgres */
	char *pgdir;     /* $home/pg, owned by the server's user */
	char *datadir;   /* $home/pg/data */
	char *tmpdata;   /* $home/pg/data.tmp, initdb target */
	char *rundir;    /* $home/pg/run, the socket directory */
	char *logpath;   /* $home/pg/server.log */
	char *initlog;   /* $home/pg/initdb.log */
	char *lockpath;  /* $home/pg/lock, serialises up/down */
	char *dsn;       /* conninfo for database "ax" */
	char *admin_dsn; /* conninfo for database "postgres" */
	int   fast;      /* test-only speed settings */
	int   drop;      /* 1: we are root, children run as uid/gid */
	uid_t uid;
	gid_t gid;
	char  user[64]; /* name of the server's user, for messages */
	pid_t child;    /* postmaster we forked (to reap it), or 0 */
};

static char *
join(const char *a, const char *b)
{
	char *s = NULL;
	if (asprintf(&s, "%s/%s", a, b) < 0)
		return NULL;
	return s;
}

/* Appends v as a libpq conninfo value: single-quoted, \ and ' escaped. */
static void
conninfo_quote(char *buf, size_t cap, const char *v)
{
	size_t n = strlen(buf);
	if (n + 1 < cap)
		buf[n++] = '\'';
	for (; *v != '\0' && n + 3 < cap; v++) {
		if (*v == '\\' || *v == '\'')
			buf[n++] = '\\';
		buf[n++] = *v;
	}
	if (n + 1 < cap)
		buf[n++] = '\'';
	buf[n] = '\0';
}

static char *
make_dsn(const char *rundir, const char *db)
{
	size_t cap = strlen(rundir) * 2 + 128;
	char  *s   = malloc(cap);
	if (s == NULL)
		return NULL;
	s[0] = '\0';
	strcat(s, "host=");
	conninfo_quote(s, cap, rundir);
	snprintf(s + strlen(s), cap - strlen(s),
	         " port=%d dbname=%s user=%s connect_timeout=10",
	         AX_PG_EMBED_PORT, db, AX_PG_EMBED_USER);
	return s;
}

static const char *
default_pgbin(void)
{
	const char *env = getenv("AX_PGBIN");
	if (env != NULL && env[0] != '\0')
		return env;
	return AX_PGBIN_DEFAULT;
}

ax_err
ax_pg_embed_new(const char *home, const char *pgbin, ax_pg_embed **out)
{
	char         cwd[PATH_MAX];
	ax_pg_embed *e;

	*out = NULL;
	if (home == NULL || home[0] == '\0')
		return ax_err_set(AX_EINVAL, "AX home directory is empty");
	if (pgbin == NULL || pgbin[0] == '\0')
		pgbin = default_pgbin();
	if ((e = calloc(1, sizeof(*e))) == NULL)
		return ax_err_set(AX_ENOMEM, "out of memory");
	while (home[0] == '.' && home[1] == '/' && home[2] != '\0')
		home += 2; /* "./.ax" -> "$PWD/.ax", not "$PWD/./.ax" */
	if (home[0] == '/') {
		e->home = strdup(home);
	} else if (getcwd(cwd, sizeof(cwd)) != NULL) {
		e->home = join(cwd, home);
	} else {
		ax_pg_embed_free(e);
		return ax_err_set(
		    AX_EIO, "cannot resolve relative AX home '%s': getcwd: %s",
		    home, strerror(errno));
	}
	e->pgbin = strdup(pgbin);
	if (e->home != NULL)
		e->pgdir = join(e->home, "pg");
	if (e->pgdir != NULL) {
		e->datadir  = join(e->pgdir, "data");
		e->tmpdata  = join(e->pgdir, "data.tmp");
		e->rundir   = join(e->pgdir, "run");
		e->logpath  = join(e->pgdir, "server.log");
		e->initlog  = join(e->pgdir, "initdb.log");
		e->lockpath = join(e->pgdir, "lock");
	}
	if (e->rundir != NULL) {
		e->dsn       = make_dsn(e->rundir, AX_PG_EMBED_DB);
		e->admin_dsn = make_dsn(e->rundir, "postgres");
	}
	if (e->pgbin == NULL || e->dsn == NULL || e->admin_dsn == NULL ||
	    e->datadir == NULL || e->tmpdata == NULL || e->logpath == NULL ||
	    e->initlog == NULL || e->lockpath == NULL) {
		ax_pg_embed_free(e);
		return ax_err_set(AX_ENOMEM, "out of memory");
	}
	/* The socket file is $rundir/.s.PGSQL.5432 and must fit sun_path. */
	if (strlen(e->rundir) + sizeof("/.s.PGSQL.65535") >
	    sizeof(((struct sockaddr_un *) 0)->sun_path)) {
		ax_err rv = ax_err_set(
		    AX_EINVAL,
		    "AX home '%s' is too long for a Unix socket path "
		    "(%s/.s.PGSQL.%d must fit in %zu bytes); choose a "
		    "shorter --home",
		    e->home, e->rundir, AX_PG_EMBED_PORT,
		    sizeof(((struct sockaddr_un *) 0)->sun_path) - 1);
		ax_pg_embed_free(e);
		return rv;
	}
	snprintf(e->user, sizeof(e->user), "%s", "self");
	*out = e;
	return AX_OK;
}

void
ax_pg_embed_free(ax_pg_embed *e)
{
	if (e == NULL)
		return;
	if (e->child > 0)
		waitpid(e->child, NULL, WNOHANG);
	free(e->home);
	free(e->pgbin);
	free(e->pgdir);
	free(e->datadir);
	free(e->tmpdata);
	free(e->rundir);
	free(e->logpath);
	free(e->initlog);
	free(e->lockpath);
	free(e->dsn);
	free(e->admin_dsn);
	free(e);
}

void
ax_pg_embed_set_fast(ax_pg_embed *e, int fast)
{
	e->fast = fast != 0;
}

const char *
ax_pg_embed_dsn(const ax_pg_embed *e)
{
	return e->dsn;
}

const char *
ax_pg_embed_home(const ax_pg_embed *e)
{
	return e->home;
}

const char *
ax_pg_embed_datadir(const ax_pg_embed *e)
{
	return e->datadir;
}

const char *
ax_pg_embed_logpath(const ax_pg_embed *e)
{
	return e->logpath;
}

const char *
ax_pg_embed_pgbin(const ax_pg_embed *e)
{
	return e->pgbin;
}

/* ---- children ---------------------------------------------------------- */

static void
close_from(int lowfd)
{
#ifdef SYS_close_range
	if (syscall(SYS_close_range, (unsigned) lowfd, ~0U, 0) == 0)
		return;
#endif
	long max = sysconf(_SC_OPEN_MAX);
	if (max < 0 || max > 65536)
		max = 65536;
	for (int fd = lowfd; fd < max; fd++)
		close(fd);
}

/*
 * In the child after fork: become the server's user (when root), enter
 * $home/pg, send stdin to /dev/null and stdout/stderr to outpath
 * (appended), close everything else. Only async-signal-safe calls.
 * Returns 0 or a CHILD_* exit code.
 */
static int
child_setup(const ax_pg_embed *e, const char *outpath)
{
	int fd;
	if (e->drop) {
		if (setgroups(0, NULL) != 0 || setgid(e->gid) != 0 ||
		    setuid(e->uid) != 0)
			return CHILD_EPRIV;
	}
	if (chdir(e->pgdir) != 0)
		return CHILD_ECHDIR;
	if ((fd = open("/dev/null", O_RDONLY)) >= 0) {
		dup2(fd, 0);
		if (fd != 0)
			close(fd);
	}
	fd = open(outpath, O_WRONLY | O_CREAT | O_APPEND, 0600);
	if (fd < 0)
		return CHILD_EOPEN;
	dup2(fd, 1);
	dup2(fd, 2);
	if (fd > 2)
		close(fd);
	close_from(3);
	return 0;
}

/*
 * Forks argv[0] with argv, output appended to outpath. detach: new session
 * (the postmaster outlives us and ignores our terminal's signals).
 */
static ax_err
spawn(const ax_pg_embed *e, char *const argv[], const char *outpath,
      int detach, pid_t *pid)
{
	pid_t p = fork();
	if (p < 0)
		return ax_err_set(AX_EIO, "fork for %s: %s", argv[0],
		                  strerror(errno));
	if (p == 0) {
		int      rc;
		sigset_t none;
		if (detach)
			setsid();
		/* A caller's blocked or ignored signals must not leak in. */
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGQUIT, SIG_DFL);
		if ((rc = child_setup(e, outpath)) != 0)
			_exit(rc);
		execv(argv[0], argv);
		_exit(CHILD_EEXEC);
	}
	*pid = p;
	return AX_OK;
}

static int
wait_child(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/*
 * Last lines of a log file written since offset from, at most TAIL_BYTES,
 * into buf (so a start failure shows this start's messages only).
 */
static const char *
log_tail(const char *path, off_t from, char *buf, size_t cap)
{
	struct stat st;
	size_t      want = cap - 1 < TAIL_BYTES ? cap - 1 : TAIL_BYTES;
	ssize_t     n;
	int         cut = 0;
	int         fd  = open(path, O_RDONLY | O_CLOEXEC);

	buf[0] = '\0';
	if (fd < 0) {
		snprintf(buf, cap, "(cannot read %s: %s)", path,
		         strerror(errno));
		return buf;
	}
	if (fstat(fd, &st) != 0)
		st.st_size = 0;
	if (from > st.st_size)
		from = 0; /* the file was replaced meanwhile */
	if (st.st_size - from > (off_t) want) {
		from = st.st_size - (off_t) want;
		cut  = 1;
	} else {
		want = (size_t) (st.st_size - from);
	}
	lseek(fd, from, SEEK_SET);
	n = read(fd, buf, want);
	close(fd);
	if (n <= 0) {
		snprintf(buf, cap, "(%s is empty)", path);
		return buf;
	}
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	/* Start at a line boundary when we cut the file. */
	if (cut) {
		char *nl = strchr(buf, '\n');
		if (nl != NULL)
			memmove(buf, nl + 1, strlen(nl + 1) + 1);
	}
	return buf;
}

/* Text for a child's failure before exec (CHILD_* codes). */
static const char *
child_failure(int rc)
{
	switch (rc) {
	case CHILD_EPRIV:
		return "could not switch to the server's user";
	case CHILD_ECHDIR:
		return "could not enter the cluster directory";
	case CHILD_EOPEN:
		return "could not open its log file";
	case CHILD_EEXEC:
		return "could not execute the binary";
	default:
		return NULL;
	}
}

/* ---- user and directories ---------------------------------------------- */

/*
 * As root, picks the server's user: `postgres` (from the postgresql
 * package), else `ax`, creating `ax` as a system user when neither exists.
 */
static ax_err
resolve_user(ax_pg_embed *e)
{
	struct passwd *pw;
	const char    *names[] = { "postgres", "ax" };

	e->drop = 0;
	if (geteuid() != 0) {
		struct passwd *me = getpwuid(geteuid());
		snprintf(e->user, sizeof(e->user), "%s",
		         me != NULL ? me->pw_name : "self");
		return AX_OK;
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		for (size_t i = 0; i < 2; i++) {
			if ((pw = getpwnam(names[i])) == NULL ||
			    pw->pw_uid == 0)
				continue;
			e->drop = 1;
			e->uid  = pw->pw_uid;
			e->gid  = pw->pw_gid;
			snprintf(e->user, sizeof(e->user), "%s", names[i]);
			return AX_OK;
		}
		if (attempt == 0) {
			char *argv[] = { "/usr/sbin/useradd",
				         "--system",
				         "--user-group",
				         "--no-create-home",
				         "--home-dir",
				         "/nonexistent",
				         "--shell",
				         "/usr/sbin/nologin",
				         "ax",
				         NULL };
			pid_t pid    = fork();
			if (pid == 0) {
				close_from(3);
				execv(argv[0], argv);
				_exit(CHILD_EEXEC);
			}
			if (pid > 0)
				wait_child(pid);
			ax_log_info(
			    "pg_embed",
			    "created system user ax to run PostgreSQL");
		}
	}
	return ax_err_set(
	    AX_EPERM,
	    "PostgreSQL refuses to run as root and there is no `postgres` "
	    "or `ax` system user (useradd failed); install postgresql-15 "
	    "or create a system user `ax`");
}

static ax_err
errno_err(int err)
{
	return (err == EACCES || err == EPERM || err == EROFS) ? AX_EPERM
	                                                       : AX_EIO;
}

/* mkdir -p for the home directory (0755: the server's user traverses). */
static ax_err
mkdir_p(const char *path)
{
	char  *p  = strdup(path);
	ax_err rv = AX_OK;
	if (p == NULL)
		return ax_err_set(AX_ENOMEM, "out of memory");
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char c = *s;
		*s     = '\0';
		if (mkdir(p, 0755) != 0 && errno != EEXIST) {
			rv = ax_err_set(
			    errno_err(errno),
			    "cannot create AX home %s: mkdir %s: %s", path, p,
			    strerror(errno));
			break;
		}
		*s = c;
		if (c == '\0')
			break;
	}
	free(p);
	return rv;
}

/* Creates dir (mode 0700) owned by the server's user. */
static ax_err
make_owned_dir(const ax_pg_embed *e, const char *dir)
{
	struct stat st;
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return ax_err_set(errno_err(errno), "cannot create %s: %s",
		                  dir, strerror(errno));
	if (stat(dir, &st) != 0)
		return ax_err_set(errno_err(errno), "cannot stat %s: %s", dir,
		                  strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return ax_err_set(AX_EIO, "%s exists but is not a directory",
		                  dir);
	if (e->drop && (st.st_uid != e->uid || st.st_gid != e->gid) &&
	    chown(dir, e->uid, e->gid) != 0)
		return ax_err_set(errno_err(errno),
		                  "cannot chown %s to %s: %s", dir, e->user,
		                  strerror(errno));
	return AX_OK;
}

/*
 * Checks, as the server's user, that $home/pg can be entered and written:
 * a root-owned home of mode 0700 (or a parent like /root) would otherwise
 * fail later inside initdb with a less helpful message.
 */
static ax_err
probe_pgdir(const ax_pg_embed *e)
{
	int   st;
	pid_t pid = fork();
	if (pid < 0)
		return ax_err_set(AX_EIO, "fork: %s", strerror(errno));
	if (pid == 0) {
		if (e->drop &&
		    (setgroups(0, NULL) != 0 || setgid(e->gid) != 0 ||
		     setuid(e->uid) != 0))
			_exit(CHILD_EPRIV);
		if (access(e->pgdir, R_OK | W_OK | X_OK) != 0)
			_exit(errno & 0x7f);
		_exit(0);
	}
	st = wait_child(pid);
	if (st == 0)
		return AX_OK;
	if (st == CHILD_EPRIV)
		return ax_err_set(AX_EPERM, "cannot switch to user %s",
		                  e->user);
	return ax_err_set(
	    AX_EPERM,
	    "PostgreSQL runs as user %s, which cannot use %s (%s); make %s "
	    "and each parent directory traversable (chmod o+x) or choose "
	    "another --home",
	    e->user, e->pgdir, strerror(st), e->home);
}

static ax_err
prepare_dirs(ax_pg_embed *e)
{
	struct stat st;
	ax_err      rv;

	if (stat(e->home, &st) != 0) {
		if (errno != ENOENT)
			return ax_err_set(errno_err(errno),
			                  "cannot access AX home %s: %s",
			                  e->home, strerror(errno));
		if ((rv = mkdir_p(e->home)) != AX_OK)
			return rv;
	} else if (!S_ISDIR(st.st_mode)) {
		return ax_err_set(AX_EIO, "AX home %s is not a directory",
		                  e->home);
	}
	if (access(e->home, R_OK | W_OK | X_OK) != 0)
		return ax_err_set(errno_err(errno),
		                  "AX home %s is not writable: %s", e->home,
		                  strerror(errno));
	if ((rv = make_owned_dir(e, e->pgdir)) != AX_OK ||
	    (rv = make_owned_dir(e, e->rundir)) != AX_OK)
		return rv;
	return probe_pgdir(e);
}

static ax_err
check_binary(const ax_pg_embed *e, const char *name)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", e->pgbin, name);
	if (access(path, X_OK) == 0)
		return AX_OK;
	return ax_err_set(
	    AX_ENOENT,
	    "PostgreSQL binary %s not found (%s); install postgresql-15 "
	    "(deploy/install-deps.sh) or set AX_PGBIN to the directory "
	    "holding initdb, pg_ctl and postgres",
	    path, strerror(errno));
}

/* Holds $home/pg/lock for the duration of up or down. */
static ax_err
lock_home(const ax_pg_embed *e, int *fd_out)
{
	int64_t deadline = ax_clock_mono_us() + LOCK_TIMEOUT_US;
	int     fd = open(e->lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return ax_err_set(errno_err(errno), "cannot open %s: %s",
		                  e->lockpath, strerror(errno));
	while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		if (errno != EWOULDBLOCK && errno != EINTR) {
			int err = errno;
			close(fd);
			return ax_err_set(AX_EIO, "cannot lock %s: %s",
			                  e->lockpath, strerror(err));
		}
		if (ax_clock_mono_us() > deadline) {
			close(fd);
			return ax_err_set(
			    AX_EBUSY,
			    "another process holds %s (an `axctl db` command "
			    "on the same home?); try again",
			    e->lockpath);
		}
		ax_clock_sleep_us(POLL_US);
	}
	*fd_out = fd;
	return AX_OK;
}

/* ---- configuration ------------------------------------------------------ */

/* Appends v to buf as a postgresql.conf string literal. */
static void
conf_quote(char *buf, size_t cap, const char *v)
{
	size_t n = strlen(buf);
	if (n + 1 < cap)
		buf[n++] = '\'';
	for (; *v != '\0' && n + 3 < cap; v++) {
		if (*v == '\'' || *v == '\\')
			buf[n++] = *v;
		buf[n++] = *v;
	}
	if (n + 1 < cap)
		buf[n++] = '\'';
	buf[n] = '\0';
}

static ax_err
write_file(const ax_pg_embed *e, const char *path, const char *text,
           int append)
{
	int flags =
	    O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC);
	int     fd  = open(path, flags, 0600);
	size_t  len = strlen(text);
	ssize_t n;
	if (fd < 0)
		return ax_err_set(errno_err(errno), "cannot write %s: %s",
		                  path, strerror(errno));
	n = write(fd, text, len);
	if (n != (ssize_t) len || fsync(fd) != 0) {
		int err = n < 0 ? errno : EIO;
		close(fd);
		return ax_err_set(AX_EIO, "cannot write %s: %s", path,
		                  strerror(err));
	}
	if (e->drop && fchown(fd, e->uid, e->gid) != 0) {
		int err = errno;
		close(fd);
		return ax_err_set(AX_EIO, "cannot chown %s: %s", path,
		                  strerror(err));
	}
	close(fd);
	return AX_OK;
}

/*
 * Writes $datadir/ax.conf, included from postgresql.conf: the socket-only
 * listener in this home's run directory, and the test speed settings.
 */
static ax_err
write_ax_conf(const ax_pg_embed *e, const char *datadir)
{
	char  conf[2048] = "# Written by AX on every start; edits are lost.\n"
	                   "listen_addresses = ''\n"
	                   "unix_socket_directories = ";
	char *path       = join(datadir, "ax.conf");
	conf_quote(conf, sizeof(conf), e->rundir);
	snprintf(conf + strlen(conf), sizeof(conf) - strlen(conf),
	         "\nunix_socket_permissions = 0700\nport = %d\n",
	         AX_PG_EMBED_PORT);
	if (e->fast)
		snprintf(conf + strlen(conf), sizeof(conf) - strlen(conf),
		         "# test speed settings: a machine crash can lose "
		         "this cluster\n"
		         "fsync = off\nsynchronous_commit = off\n"
		         "full_page_writes = off\nshared_buffers = 32MB\n");
	if (path == NULL)
		return ax_err_set(AX_ENOMEM, "out of memory");
	ax_err rv = write_file(e, path, conf, 0);
	free(path);
	return rv;
}

/* Runs initdb into data.tmp, hooks ax.conf in, renames it to data. */
static ax_err
init_cluster(ax_pg_embed *e)
{
	char   initdb[PATH_MAX], tail[TAIL_BYTES + 1];
	pid_t  pid;
	int    rc;
	ax_err rv;

	snprintf(initdb, sizeof(initdb), "%s/initdb", e->pgbin);
	/* Fast (tests): no fsync, and 1 MB WAL segments instead of 16 MB,
	 * which makes the test template a third smaller to copy. */
	char *argv[] = { initdb,
		         "-D",
		         e->tmpdata,
		         "-U",
		         AX_PG_EMBED_USER,
		         "--auth=trust",
		         "-E",
		         "UTF8",
		         "--no-locale",
		         e->fast ? "--no-sync" : NULL,
		         "--wal-segsize=1",
		         NULL };
	if ((rv = ax_fs_rm_rf(e->tmpdata)) != AX_OK)
		return rv;
	unlink(e->initlog);
	ax_log_info("pg_embed", "initdb %s as user %s", e->datadir, e->user);
	if ((rv = spawn(e, argv, e->initlog, 0, &pid)) != AX_OK)
		return rv;
	rc = wait_child(pid);
	if (rc != 0) {
		const char *why = child_failure(rc);
		if (why != NULL)
			return ax_err_set(AX_EIO, "initdb for %s: %s (%s)",
			                  e->datadir, why, initdb);
		return ax_err_set(AX_EIO,
		                  "initdb for %s failed (exit %d); last lines "
		                  "of %s:\n%s",
		                  e->datadir, rc, e->initlog,
		                  log_tail(e->initlog, 0, tail, sizeof(tail)));
	}
	char *conf = join(e->tmpdata, "postgresql.conf");
	if (conf == NULL)
		return ax_err_set(AX_ENOMEM, "out of memory");
	rv = write_file(e, conf,
	                "\n# AX settings (socket, port): see ax.conf\n"
	                "include_if_exists = 'ax.conf'\n",
	                1);
	free(conf);
	if (rv != AX_OK)
		return rv;
	if (rename(e->tmpdata, e->datadir) != 0)
		return ax_err_set(AX_EIO, "cannot rename %s to %s: %s",
		                  e->tmpdata, e->datadir, strerror(errno));
	return AX_OK;
}

static int
cluster_exists(const ax_pg_embed *e)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/PG_VERSION", e->datadir);
	return access(path, F_OK) == 0;
}

/* ---- start, stop, probe ------------------------------------------------ */

static PGPing
ping(const ax_pg_embed *e)
{
	return PQping(e->admin_dsn);
}

/* Reaps our postmaster child if it has exited; returns its status or -1. */
static int
reap_child(ax_pg_embed *e)
{
	int st;
	if (e->child <= 0)
		return -1;
	if (waitpid(e->child, &st, WNOHANG) == e->child) {
		e->child = 0;
		return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	}
	return -1;
}

static ax_err
start_server(ax_pg_embed *e)
{
	char        postgres[PATH_MAX], tail[TAIL_BYTES + 1];
	int64_t     deadline;
	ax_err      rv;
	pid_t       pid;
	struct stat st;
	off_t       logoff = 0;

	snprintf(postgres, sizeof(postgres), "%s/postgres", e->pgbin);
	char *argv[] = { postgres, "-D", e->datadir, NULL };
	/* A postmaster of ours that died (kill -9) and was not reaped yet
	 * is still a process to the new one, which then refuses to start
	 * ("lock file postmaster.pid already exists"), and its pid would be
	 * lost below: reap it first (it is dying: nothing answered). */
	deadline = ax_clock_mono_us() + KILL_TIMEOUT_US;
	while (e->child > 0 && reap_child(e) < 0 &&
	       ax_clock_mono_us() < deadline)
		ax_clock_sleep_us(POLL_US);
	if ((rv = write_ax_conf(e, e->datadir)) != AX_OK)
		return rv;
	if (stat(e->logpath, &st) == 0)
		logoff = st.st_size;
	ax_log_info("pg_embed", "starting PostgreSQL in %s", e->datadir);
	if ((rv = spawn(e, argv, e->logpath, 1, &pid)) != AX_OK)
		return rv;
	e->child = pid;
	deadline = ax_clock_mono_us() + START_TIMEOUT_US;
	for (;;) {
		if (ping(e) == PQPING_OK)
			return AX_OK;
		int rc = reap_child(e);
		if (rc >= 0) {
			const char *why = child_failure(rc);
			return ax_err_set(
			    AX_EDBCONN,
			    "PostgreSQL did not start (%s, exit %d); last "
			    "lines of %s:\n%s",
			    why != NULL ? why : "server exited", rc,
			    e->logpath,
			    log_tail(e->logpath, logoff, tail, sizeof(tail)));
		}
		if (ax_clock_mono_us() > deadline)
			return ax_err_set(
			    AX_ETIMEDOUT,
			    "PostgreSQL did not accept connections within "
			    "60 s; last lines of %s:\n%s",
			    e->logpath,
			    log_tail(e->logpath, logoff, tail, sizeof(tail)));
		ax_clock_sleep_us(POLL_US);
	}
}

/* Creates database "ax" when missing (a crash may hit between steps). */
static ax_err
ensure_database(const ax_pg_embed *e)
{
	PGconn   *c = PQconnectdb(e->admin_dsn);
	PGresult *r;
	ax_err    rv = AX_OK;

	if (PQstatus(c) != CONNECTION_OK) {
		rv = ax_err_set(AX_EDBCONN, "cannot connect to %s: %s",
		                e->rundir, PQerrorMessage(c));
		PQfinish(c);
		return rv;
	}
	r = PQexec(c,
	           "SELECT 1 FROM pg_database WHERE datname = '" AX_PG_EMBED_DB
	           "'");
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		rv = ax_err_set(AX_EDB, "cannot list databases: %s",
		                PQerrorMessage(c));
	} else if (PQntuples(r) == 0) {
		PQclear(r);
		r = PQexec(c, "CREATE DATABASE " AX_PG_EMBED_DB);
		if (PQresultStatus(r) != PGRES_COMMAND_OK)
			rv = ax_err_set(
			    AX_EDB,
			    "cannot create database " AX_PG_EMBED_DB ": %s",
			    PQerrorMessage(c));
	}
	PQclear(r);
	PQfinish(c);
	return rv;
}

/* Waits while the server answers "starting up" (another up under way). */
static PGPing
settle(const ax_pg_embed *e)
{
	int64_t deadline = ax_clock_mono_us() + START_TIMEOUT_US;
	PGPing  p;
	while ((p = ping(e)) == PQPING_REJECT && ax_clock_mono_us() < deadline)
		ax_clock_sleep_us(POLL_US);
	return p;
}

ax_err
ax_pg_embed_up(ax_pg_embed *e)
{
	ax_err rv;
	int    lockfd = -1;

	if ((rv = check_binary(e, "initdb")) != AX_OK ||
	    (rv = check_binary(e, "postgres")) != AX_OK)
		return rv;
	if ((rv = resolve_user(e)) != AX_OK ||
	    (rv = prepare_dirs(e)) != AX_OK ||
	    (rv = lock_home(e, &lockfd)) != AX_OK)
		return rv;
	if (!cluster_exists(e))
		rv = init_cluster(e);
	if (rv == AX_OK && settle(e) != PQPING_OK)
		rv = start_server(e);
	if (rv == AX_OK)
		rv = ensure_database(e);
	close(lockfd);
	return rv;
}

/*
 * The postmaster's pid from postmaster.pid, or 0 when the file is missing
 * or names a process that is not this cluster's postmaster (a stale file
 * after a crash, its pid reused): the postmaster's working directory is its
 * data directory, which /proc tells us.
 */
static pid_t
postmaster_pid(const ax_pg_embed *e)
{
	char  path[PATH_MAX], cwd[PATH_MAX], real[PATH_MAX];
	long  pid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/postmaster.pid", e->datadir);
	if ((f = fopen(path, "re")) == NULL)
		return 0;
	if (fscanf(f, "%ld", &pid) != 1 || pid <= 0)
		pid = 0;
	fclose(f);
	if (pid == 0 || realpath(e->datadir, real) == NULL)
		return 0;
	snprintf(path, sizeof(path), "/proc/%ld/cwd", pid);
	ssize_t n = readlink(path, cwd, sizeof(cwd) - 1);
	if (n < 0)
		return errno == ENOENT ? 0 : (pid_t) pid;
	cwd[n] = '\0';
	return strcmp(cwd, real) == 0 ? (pid_t) pid : 0;
}

/* Waits until the postmaster is gone; 1 when it is. */
static int
wait_gone(ax_pg_embed *e, pid_t pid, int64_t timeout_us)
{
	int64_t deadline = ax_clock_mono_us() + timeout_us;
	for (;;) {
		if (e->child == pid)
			reap_child(e);
		if (kill(pid, 0) != 0 && errno == ESRCH)
			return 1;
		if (postmaster_pid(e) != pid)
			return 1;
		if (ax_clock_mono_us() > deadline)
			return 0;
		ax_clock_sleep_us(POLL_US);
	}
}

ax_err
ax_pg_embed_down(ax_pg_embed *e)
{
	ax_err rv;
	int    lockfd = -1;
	pid_t  pid;

	if (access(e->pgdir, F_OK) != 0)
		return AX_OK; /* never created: nothing runs */
	if ((rv = lock_home(e, &lockfd)) != AX_OK)
		return rv;
	if ((pid = postmaster_pid(e)) == 0)
		goto out;
	ax_log_info("pg_embed", "stopping PostgreSQL in %s (pid %ld)",
	            e->datadir, (long) pid);
	if (kill(pid, SIGINT) != 0) {
		if (errno != ESRCH)
			rv = ax_err_set(
			    errno_err(errno),
			    "cannot signal PostgreSQL (pid %ld): %s",
			    (long) pid, strerror(errno));
		goto out;
	}
	if (wait_gone(e, pid, STOP_TIMEOUT_US))
		goto out;
	ax_log_warn("pg_embed",
	            "PostgreSQL (pid %ld) ignored fast shutdown for 60 s; "
	            "sending immediate shutdown",
	            (long) pid);
	kill(pid, SIGQUIT);
	if (!wait_gone(e, pid, KILL_TIMEOUT_US))
		rv = ax_err_set(AX_ETIMEDOUT,
		                "PostgreSQL (pid %ld, %s) did not stop",
		                (long) pid, e->datadir);
out:
	close(lockfd);
	return rv;
}

/* 1 while pid runs (a zombie, killed and waiting for whoever adopted
 * it to reap it, runs no more). */
static int
alive(pid_t pid)
{
	char  path[64], buf[512], *rp;
	char  st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long) pid);
	if ((f = fopen(path, "re")) == NULL)
		return 0;
	if (fgets(buf, sizeof(buf), f) == NULL)
		buf[0] = '\0';
	fclose(f);
	if ((rp = strrchr(buf, ')')) == NULL ||
	    sscanf(rp + 1, " %c", &st) != 1)
		return 0;
	return st != 'Z' && st != 'X';
}

/* The processes whose parent is pm (a postmaster's children: backends,
 * the WAL writer, the checkpointer ...), at most max; each child of a
 * postmaster leads a session of its own, so no process group holds them
 * all. */
static size_t
children_of(pid_t pm, pid_t *out, size_t max)
{
	DIR           *d = opendir("/proc");
	struct dirent *de;
	size_t         n = 0;

	if (d == NULL)
		return 0;
	while (n < max && (de = readdir(d)) != NULL) {
		char  path[300], buf[512], *rp;
		long  ppid = 0;
		FILE *f;
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
		if ((f = fopen(path, "re")) == NULL)
			continue;
		buf[0] = '\0';
		if (fgets(buf, sizeof(buf), f) == NULL)
			buf[0] = '\0';
		fclose(f);
		/* pid (comm) state ppid ...: comm may hold spaces */
		if ((rp = strrchr(buf, ')')) != NULL &&
		    sscanf(rp + 1, " %*c %ld", &ppid) == 1 && ppid == pm)
			out[n++] = (pid_t) atol(de->d_name);
	}
	closedir(d);
	return n;
}

ax_err
ax_pg_embed_crash(ax_pg_embed *e)
{
	pid_t   kids[512];
	size_t  n; /* the postmaster's children, then itself */
	int64_t deadline;
	ax_err  rv;
	int     lockfd = -1;
	pid_t   pid;

	if (access(e->pgdir, F_OK) != 0)
		return AX_OK;
	if ((rv = lock_home(e, &lockfd)) != AX_OK)
		return rv;
	if ((pid = postmaster_pid(e)) == 0)
		goto out;
	ax_log_warn("pg_embed",
	            "killing PostgreSQL in %s (pid %ld) and "
	            "its processes with SIGKILL",
	            e->datadir, (long) pid);
	/* stopped, the postmaster forks no child between the listing and
	 * the kill */
	kill(pid, SIGSTOP);
	n = children_of(pid, kids, sizeof(kids) / sizeof(kids[0]) - 1);
	kill(pid, SIGKILL);
	for (size_t i = 0; i < n; i++)
		kill(kids[i], SIGKILL);
	/* postmaster.pid stays, as after a crash: a new postmaster refuses
	 * to start while that pid is still a process (a zombie too), or
	 * while a process of the old one holds its shared memory */
	if (e->child == pid && waitpid(pid, NULL, 0) == pid)
		e->child = 0;
	kids[n++] = pid;
	deadline  = ax_clock_mono_us() + KILL_TIMEOUT_US;
	for (size_t i = 0; i < n; i++)
		while (alive(kids[i])) {
			if (ax_clock_mono_us() > deadline) {
				rv = ax_err_set(AX_ETIMEDOUT,
				                "a process of PostgreSQL (pid "
				                "%ld) did not die",
				                (long) kids[i]);
				goto out;
			}
			ax_clock_sleep_us(POLL_US);
		}
out:
	close(lockfd);
	return rv;
}

ax_err
ax_pg_embed_status(ax_pg_embed *e, int *running)
{
	PGPing p;
	*running = 0;
	if (access(e->rundir, F_OK) != 0)
		return AX_OK;
	reap_child(e);
	p        = ping(e);
	*running = (p == PQPING_OK || p == PQPING_REJECT);
	return AX_OK;
}
