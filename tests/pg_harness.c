/*
 * pg_harness.c - throwaway PostgreSQL clusters for integration and e2e
 * tests. See pg_harness.h for the contract.
 *
 * Role: makes a cluster start cost a directory copy plus a server start
 * instead of an initdb: the template is built once per build directory
 * (in /tmp, where the server's user can always write, then copied into the
 * build directory), and every cluster copies it.
 *
 * Invariants: the template directory appears only complete (copied to
 * pg-template.tmp, then renamed); building and sweeping happen under the
 * template lock. Each cluster directory holds an `owner` file with the pid
 * of the test process that started it; the sweep removes clusters whose
 * owner is gone.
 *
 * Workload: a few clusters per test binary, many binaries in parallel:
 * some 260 test cases start one each, so the copy is most of a suite's
 * database cost. Clusters live on a tmpfs when there is one with room
 * (/dev/shm: the copy of the 35 MB template takes about 0.3 s there
 * against 1-3 s on this machine's disk, and removing it is free), else
 * in /tmp; AX_TEST_TMPDIR names another place.
 */
#include "pg_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "ax_config.h"
#include "fs.h"
#include "hash.h"
#include "migrate.h"
#include "proc_watch.h"

#define TEMPLATE_DIR  AX_BUILD_ROOT "/pg-template"
#define TEMPLATE_TMP  AX_BUILD_ROOT "/pg-template.tmp"
#define TEMPLATE_LOCK AX_BUILD_ROOT "/pg-template.lock"
/* + the fingerprint of the embedded migrations (migrated_template) */
#define MIGRATED_DIR AX_BUILD_ROOT "/pg-template-ax-"
#define CLUSTER_NAME "ax-test-pg-"
#define SHM_DIR      "/dev/shm"
#define SHM_MIN_FREE (1ULL << 30) /* room for ~25 clusters at once */

struct ax_test_pg {
	char         home[PATH_MAX]; /* <base>/ax-test-pg-XXXXXX */
	ax_pg_embed *embed;
};

static void
rm_rf(const char *path)
{
	(void) ax_fs_rm_rf(path);
}

/*
 * A fresh temp directory that the server's user can traverse (mkdtemp
 * makes it 0700; as root the server runs as `postgres`).
 */
static ax_err
make_tmp_home(char *buf, size_t cap, const char *pattern)
{
	snprintf(buf, cap, "%s", pattern);
	if (mkdtemp(buf) == NULL)
		return ax_err_set(AX_EIO, "mkdtemp %s: %s", pattern,
		                  strerror(errno));
	if (chmod(buf, 0711) != 0) {
		int err = errno;
		rm_rf(buf);
		return ax_err_set(AX_EIO, "chmod %s: %s", buf, strerror(err));
	}
	return AX_OK;
}

/* The directory clusters are made in (see the top of this file). */
static const char *
cluster_base(void)
{
	const char   *env = getenv("AX_TEST_TMPDIR");
	struct statfs sf;

	if (env != NULL && env[0] != '\0')
		return env;
	if (statfs(SHM_DIR, &sf) == 0 && sf.f_type == TMPFS_MAGIC &&
	    (unsigned long long) sf.f_bavail *
	            (unsigned long long) sf.f_bsize >=
	        SHM_MIN_FREE &&
	    access(SHM_DIR, W_OK | X_OK) == 0)
		return SHM_DIR;
	return "/tmp";
}

/* Stops and removes the cluster of a test that died without stopping it. */
static void
sweep_home(const char *home)
{
	ax_pg_embed *e;

	if (ax_pg_embed_new(home, NULL, &e) == AX_OK) {
		ax_pg_embed_down(e);
		ax_pg_embed_free(e);
	}
	rm_rf(home);
}

/* initdb + database "ax" in /tmp, stopped cleanly, copied to the build. */
static ax_err
build_template(void)
{
	char         home[64], data[128];
	ax_pg_embed *e = NULL;
	ax_err       rv;

	if ((rv = make_tmp_home(home, sizeof(home),
	                        "/tmp/ax-test-pgtpl-XXXXXX")) != AX_OK)
		return rv;
	if ((rv = ax_pg_embed_new(home, NULL, &e)) == AX_OK) {
		ax_pg_embed_set_fast(e, 1);
		if ((rv = ax_pg_embed_up(e)) == AX_OK)
			rv = ax_pg_embed_down(e);
		ax_pg_embed_free(e);
	}
	snprintf(data, sizeof(data), "%s/pg/data", home);
	if (rv == AX_OK) {
		rm_rf(TEMPLATE_TMP);
		rv = ax_fs_copy_tree(data, TEMPLATE_TMP);
	}
	if (rv == AX_OK && rename(TEMPLATE_TMP, TEMPLATE_DIR) != 0)
		rv = ax_err_set(AX_EIO, "rename %s: %s", TEMPLATE_TMP,
		                strerror(errno));
	if (rv != AX_OK) {
		char detail[1024];
		snprintf(detail, sizeof(detail), "%s", ax_err_detail());
		rm_rf(home);
		rm_rf(TEMPLATE_TMP);
		return ax_err_set(rv, "building the test cluster template: %s",
		                  detail);
	}
	rm_rf(home);
	return AX_OK;
}

/*
 * The migrated template's directory: MIGRATED_DIR plus a fingerprint of
 * every embedded migration's checksum, so that a build whose migrations
 * changed (an edited or a new file) never copies a stale schema.
 */
static void
migrated_template(char *buf, size_t cap)
{
	uint64_t h = ax_hash_u64(ax_migrations_count);
	for (size_t i = 0; i < ax_migrations_count; i++)
		h = ax_hash_u64(h ^ ax_hash_str(ax_migrations[i].checksum));
	snprintf(buf, cap, MIGRATED_DIR "%016llx", (unsigned long long) h);
}

/* Removes the migrated templates (and half copies) other than keep. */
static void
rm_stale_migrated(const char *keep)
{
	glob_t g;
	if (glob(MIGRATED_DIR "*", 0, NULL, &g) != 0)
		return;
	for (size_t i = 0; i < g.gl_pathc; i++)
		if (strcmp(g.gl_pathv[i], keep) != 0)
			rm_rf(g.gl_pathv[i]);
	globfree(&g);
}

static ax_err
write_owner(const char *home)
{
	char  path[PATH_MAX + 8];
	FILE *f;
	snprintf(path, sizeof(path), "%s/owner", home);
	if ((f = fopen(path, "we")) == NULL)
		return ax_err_set(AX_EIO, "cannot write %s: %s", path,
		                  strerror(errno));
	fprintf(f, "%ld\n", (long) getpid());
	fclose(f);
	return AX_OK;
}

/* Copies template into a new cluster directory and starts it. */
static ax_err
start_from(const char *template, ax_test_pg **out)
{
	char        pgdir[PATH_MAX + 8], data[PATH_MAX + 16], detail[1024];
	char        pattern[PATH_MAX];
	ax_test_pg *pg;
	ax_err      rv;

	*out = NULL;
	if ((pg = calloc(1, sizeof(*pg))) == NULL)
		return ax_err_set(AX_ENOMEM, "out of memory");
	snprintf(pattern, sizeof(pattern), "%s/" CLUSTER_NAME "XXXXXX",
	         cluster_base());
	if ((rv = make_tmp_home(pg->home, sizeof(pg->home), pattern)) !=
	    AX_OK) {
		free(pg);
		return rv;
	}
	snprintf(pgdir, sizeof(pgdir), "%s/pg", pg->home);
	snprintf(data, sizeof(data), "%s/data", pgdir);
	if ((rv = write_owner(pg->home)) != AX_OK)
		goto fail;
	if (mkdir(pgdir, 0700) != 0) {
		rv =
		    ax_err_set(AX_EIO, "mkdir %s: %s", pgdir, strerror(errno));
		goto fail;
	}
	if ((rv = ax_fs_copy_tree(template, data)) != AX_OK ||
	    (rv = ax_pg_embed_new(pg->home, NULL, &pg->embed)) != AX_OK)
		goto fail;
	ax_pg_embed_set_fast(pg->embed, 1);
	if ((rv = ax_pg_embed_up(pg->embed)) != AX_OK)
		goto fail;
	*out = pg;
	return AX_OK;
fail:
	snprintf(detail, sizeof(detail), "%s", ax_err_detail());
	ax_test_pg_stop(pg);
	return ax_err_set(rv, "%s", detail);
}

/*
 * A cluster copied from the plain template, migrated and stopped cleanly;
 * its data directory becomes the migrated template.
 */
static ax_err
build_migrated(const char *dir)
{
	char        data[PATH_MAX + 16], tmp[PATH_MAX + 8], detail[1024];
	ax_test_pg *pg;
	ax_err      rv;

	if ((rv = start_from(TEMPLATE_DIR, &pg)) != AX_OK)
		return rv;
	snprintf(data, sizeof(data), "%s/pg/data", pg->home);
	snprintf(tmp, sizeof(tmp), "%s.tmp", dir);
	if ((rv = ax_migrate_run(ax_test_pg_dsn(pg), NULL)) == AX_OK &&
	    (rv = ax_pg_embed_down(pg->embed)) == AX_OK) {
		rm_rf(tmp);
		rv = ax_fs_copy_tree(data, tmp);
	}
	if (rv == AX_OK && rename(tmp, dir) != 0)
		rv = ax_err_set(AX_EIO, "rename %s: %s", tmp, strerror(errno));
	snprintf(detail, sizeof(detail), "%s", ax_err_detail());
	ax_test_pg_stop(pg);
	if (rv != AX_OK) {
		rm_rf(tmp);
		return ax_err_set(
		    rv, "building the migrated test template: %s", detail);
	}
	return AX_OK;
}

/* The plain template, and the migrated one when `migrated` (into buf). */
static ax_err
ensure_template(int migrated, char *buf, size_t cap)
{
	struct stat st;
	ax_err      rv = AX_OK;
	int fd = open(TEMPLATE_LOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return ax_err_set(AX_EIO, "cannot open %s: %s", TEMPLATE_LOCK,
		                  strerror(errno));
	while (flock(fd, LOCK_EX) != 0)
		if (errno != EINTR) {
			int err = errno;
			close(fd);
			return ax_err_set(AX_EIO, "flock %s: %s",
			                  TEMPLATE_LOCK, strerror(err));
		}
	/* both places: an earlier run may have used the other one */
	ax_test_sweep_orphans("/tmp/" CLUSTER_NAME "*/owner", sweep_home);
	ax_test_sweep_orphans(SHM_DIR "/" CLUSTER_NAME "*/owner", sweep_home);
	if (strcmp(cluster_base(), "/tmp") &&
	    strcmp(cluster_base(), SHM_DIR)) {
		char glob[PATH_MAX];
		snprintf(glob, sizeof(glob), "%s/" CLUSTER_NAME "*/owner",
		         cluster_base());
		ax_test_sweep_orphans(glob, sweep_home);
	}
	if (stat(TEMPLATE_DIR "/PG_VERSION", &st) != 0)
		rv = build_template();
	if (rv == AX_OK && migrated) {
		char ver[PATH_MAX + 16];
		migrated_template(buf, cap);
		snprintf(ver, sizeof(ver), "%s/PG_VERSION", buf);
		if (stat(ver, &st) != 0) {
			/* templates of other migration sets, and a half
			 * copy (.tmp) of a build that died */
			rm_stale_migrated(buf);
			rv = build_migrated(buf);
		}
	}
	close(fd);
	return rv;
}

ax_err
ax_test_pg_start(ax_test_pg **out)
{
	ax_err rv;

	*out = NULL;
	if ((rv = ensure_template(0, NULL, 0)) != AX_OK)
		return rv;
	return start_from(TEMPLATE_DIR, out);
}

ax_err
ax_test_pg_start_migrated(ax_test_pg **out)
{
	char   dir[PATH_MAX], detail[1024];
	ax_err rv;

	*out = NULL;
	if ((rv = ensure_template(1, dir, sizeof(dir))) != AX_OK ||
	    (rv = start_from(dir, out)) != AX_OK)
		return rv;
	/* applies nothing; checks the checksums and makes the months of
	 * event_log ahead of today, which the template may lack */
	if ((rv = ax_migrate_run(ax_test_pg_dsn(*out), NULL)) != AX_OK) {
		snprintf(detail, sizeof(detail), "%s", ax_err_detail());
		ax_test_pg_stop(*out);
		*out = NULL;
		return ax_err_set(rv, "%s", detail);
	}
	return AX_OK;
}

const char *
ax_test_pg_dsn(const ax_test_pg *pg)
{
	return ax_pg_embed_dsn(pg->embed);
}

const char *
ax_test_pg_home(const ax_test_pg *pg)
{
	return pg->home;
}

ax_pg_embed *
ax_test_pg_embed(ax_test_pg *pg)
{
	return pg->embed;
}

void
ax_test_pg_stop(ax_test_pg *pg)
{
	if (pg == NULL)
		return;
	if (pg->embed != NULL) {
		ax_pg_embed_down(pg->embed);
		ax_pg_embed_free(pg->embed);
	}
	rm_rf(pg->home);
	free(pg);
}
