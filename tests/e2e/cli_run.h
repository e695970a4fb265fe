/*
 * cli_run.h - run a real AX binary from an e2e test and capture its
 * stdout, stderr and exit status.
 */
#ifndef AX_TEST_CLI_RUN_H
#define AX_TEST_CLI_RUN_H

#include <stddef.h>

/*
 * Runs bin with the NULL-terminated arguments after it (at most 30),
 * reading stdout into out and stderr into err (both NUL-terminated,
 * truncated to their capacity; both pipes are drained together, so a
 * large output cannot deadlock). Returns the exit status; fails the
 * current criterion test when bin is NULL, or the program dies of a
 * signal.
 */
int ax_cli_run(char *out, size_t outcap, char *err, size_t errcap,
               const char *bin, const char *arg, ...);

/* `axctl(ARGS..., NULL)` in a test with `out` and `err` char arrays:
 * runs $AXCTL (set by tests/meson.build). */
#define AX_CLI_AXCTL(...)                                                     \
	ax_cli_run(out, sizeof(out), err, sizeof(err), getenv("AXCTL"),       \
	           __VA_ARGS__)

/* Runs `axctl ARGS...` (AX_CLI_AXCTL) and asserts its exit status is rc,
 * printing stdout and stderr when it is not; on_fail (a statement, e.g.
 * ax_e2e_dump(e), or nothing) runs first then. */
#define AX_CLI_EXPECT_RC(on_fail, rc, ...)                                    \
	do {                                                                  \
		int got_ = AX_CLI_AXCTL(__VA_ARGS__, NULL);                   \
		if (got_ != (rc)) {                                           \
			on_fail;                                              \
		}                                                             \
		cr_assert_eq(got_, (rc),                                      \
		             "exit %d, want %d\nstdout: %s\nstderr: %s",      \
		             got_, (rc), out, err);                           \
	} while (0)

#endif /* AX_TEST_CLI_RUN_H */
