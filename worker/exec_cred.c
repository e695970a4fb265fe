/*
 * exec_cred.c - who a task runs as: the user database looked up in the
 * worker, before any fork (see ax_exec_cred_lookup in executor.h).
 *
 * Role: the worker resolves worker.run_as once at start (and a task's
 * own run_as per attempt); the local executor hands the result to the
 * task's child, which only makes the setgroups/setgid/setuid calls (the
 * user database is not async-signal-safe). The groups are those
 * initgroups(3) would set: getgrouplist(3) of the user's name and
 * primary group.
 * Invariant: switch_ids is set exactly when this process is root and the
 * user is not; a process that is not root never names another user.
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "executor.h"

/* Copies s to *at and advances it. */
static const char *
put_str(char **at, const char *s)
{
	char  *d = *at;
	size_t n = strlen(s) + 1;
	memcpy(d, s, n);
	*at += n;
	return d;
}

/* The groups of user (name, gid) into a malloc'd array. */
static ax_err
user_groups(const char *name, gid_t gid, gid_t **out, size_t *n)
{
	int    ng = 32;
	gid_t *g  = NULL;

	for (int tries = 0; tries < 8; tries++) {
		gid_t *ng_v = realloc(g, (size_t) ng * sizeof(*g));
		int    want = ng;
		if (ng_v == NULL) {
			free(g);
			return ax_err_set(AX_ENOMEM, "groups: out of memory");
		}
		g = ng_v;
		if (getgrouplist(name, gid, g, &want) >= 0) {
			*out = g;
			*n   = (size_t) want;
			return AX_OK;
		}
		ng = want > ng ? want : ng * 2;
	}
	free(g);
	return ax_err_set(AX_EIO, "the groups of user '%s' cannot be read",
	                  name);
}

ax_err
ax_exec_cred_lookup(const char *name, ax_exec_cred **out)
{
	struct passwd pw, *res = NULL;
	char          buf[16384], self[32];
	uid_t         me     = geteuid();
	gid_t        *groups = NULL;
	size_t        ng     = 0;
	const char   *uname, *home, *shell;
	ax_exec_cred *c;
	ax_err        rv;
	int           e;

	*out = NULL;
	if (name == NULL)
		e = getpwuid_r(me, &pw, buf, sizeof(buf), &res);
	else
		e = getpwnam_r(name, &pw, buf, sizeof(buf), &res);
	if (res == NULL && name != NULL)
		return ax_err_set(AX_ENOENT,
		                  "no user '%s' on this machine%s%s", name,
		                  e ? ": " : "", e ? strerror(e) : "");
	if (res == NULL) { /* a uid without a passwd entry (containers) */
		snprintf(self, sizeof(self), "%u", (unsigned) me);
		pw.pw_name  = self;
		pw.pw_uid   = me;
		pw.pw_gid   = getegid();
		pw.pw_dir   = (char *) "/";
		pw.pw_shell = (char *) "/bin/sh";
	}
	if (me != 0 && pw.pw_uid != me) {
		struct passwd spw, *sres = NULL;
		char          sbuf[4096];
		getpwuid_r(me, &spw, sbuf, sizeof(sbuf), &sres);
		return ax_err_set(AX_EPERM,
		                  "this worker runs as '%s' (uid %u), not as "
		                  "root: it cannot run tasks as '%s'",
		                  sres ? sres->pw_name : "?", (unsigned) me,
		                  pw.pw_name);
	}
	if (me == 0 && pw.pw_uid != 0 &&
	    (rv = user_groups(pw.pw_name, pw.pw_gid, &groups, &ng)) != AX_OK)
		return rv;
	uname = pw.pw_name;
	home  = pw.pw_dir != NULL && pw.pw_dir[0] ? pw.pw_dir : "/";
	shell =
	    pw.pw_shell != NULL && pw.pw_shell[0] ? pw.pw_shell : "/bin/sh";
	c = malloc(sizeof(*c) + ng * sizeof(gid_t) + strlen(uname) +
	           strlen(home) + strlen(shell) + 3);
	if (c == NULL) {
		free(groups);
		return ax_err_set(AX_ENOMEM, "user: out of memory");
	}
	memset(c, 0, sizeof(*c));
	gid_t *g = (gid_t *) (c + 1);
	if (ng > 0)
		memcpy(g, groups, ng * sizeof(gid_t));
	free(groups);
	char *at      = (char *) (g + ng);
	c->name       = put_str(&at, uname);
	c->home       = put_str(&at, home);
	c->shell      = put_str(&at, shell);
	c->uid        = pw.pw_uid;
	c->gid        = pw.pw_gid;
	c->groups     = g;
	c->n_groups   = ng;
	c->switch_ids = me == 0 && pw.pw_uid != 0;
	*out          = c;
	return AX_OK;
}
