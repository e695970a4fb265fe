/*
 * cli_run.c - fork/exec a binary for an e2e test and capture its output.
 */
#include "cli_run.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
	int    fd;
	char  *buf;
	size_t cap, len;
} sink;

/* Reads what is ready on s; returns 0 at end of file. */
static int
drain(sink *s)
{
	char   scratch[4096];
	char  *dst = s->len + 1 < s->cap ? s->buf + s->len : scratch;
	size_t room =
	    s->len + 1 < s->cap ? s->cap - 1 - s->len : sizeof(scratch);
	ssize_t r = read(s->fd, dst, room);

	if (r < 0 && errno == EINTR)
		return 1;
	if (r <= 0)
		return 0;
	if (dst != scratch)
		s->len += (size_t) r;
	return 1;
}

int
ax_cli_run(char *out, size_t outcap, char *err, size_t errcap, const char *bin,
           const char *arg, ...)
{
	char   *argv[32];
	int     argc = 0, po[2], pe[2], st;
	va_list ap;
	pid_t   pid;
	sink    s[2];

	cr_assert_not_null(bin,
	                   "binary path not set (run through meson test)");
	argv[argc++] = (char *) bin;
	va_start(ap, arg);
	for (const char *a = arg; a != NULL && argc < 31;
	     a             = va_arg(ap, const char *))
                argv[argc++] = (char *) a;
	va_end(ap);
	argv[argc] = NULL;
	cr_assert_eq(pipe2(po, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(pe, O_CLOEXEC), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		execv(bin, argv);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	s[0] = (sink) { po[0], out, outcap, 0 };
	s[1] = (sink) { pe[0], err, errcap, 0 };
	while (s[0].fd >= 0 || s[1].fd >= 0) {
		struct pollfd p[2] = { { s[0].fd, POLLIN, 0 },
			               { s[1].fd, POLLIN, 0 } };
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		for (int i = 0; i < 2; i++) {
			if (s[i].fd < 0 || p[i].revents == 0)
				continue;
			if (!drain(&s[i])) {
				close(s[i].fd);
				s[i].fd = -1;
			}
		}
	}
	out[s[0].len] = '\0';
	err[s[1].len] = '\0';
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st), "%s died: status %d", bin, st);
	return WEXITSTATUS(st);
}
