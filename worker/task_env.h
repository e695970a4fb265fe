/*
 * task_env.h - what a dispatched task runs as and with, decided by the
 * worker: the user (worker.run_as, a task's run_as checked against
 * worker.run_as_allowed) and the env values only the worker reads
 * (secrets: {from_file: PATH}, {from_env: NAME}).
 *
 * Role: worker_client.c calls these for each Dispatch before it hands
 * the attempt to the executor. The scheduler never sees a secret: a
 * Dispatch carries only the file name or the variable name, and every
 * error here names the env key and its source, never a value.
 * Threads: the worker's loop thread only.
 */
#ifndef AX_TASK_ENV_H
#define AX_TASK_ENV_H

#include <stddef.h>

#include "ax_err.h"
#include "executor.h"

/* The worker's policy; strings are the worker's config values. */
typedef struct ax_task_policy {
	const ax_exec_cred *dflt;        /* worker.run_as, resolved */
	const char         *allowed;     /* worker.run_as_allowed, "a, b" */
	const char         *secrets_dir; /* worker.secrets_dir */
	const char         *secrets_env; /* worker.secrets_env, "A, B" */
} ax_task_policy;

/*
 * The worker's default user at start-up: run_as (worker.run_as) when
 * this process is root, else the process's own user (run_as is then
 * ignored: a process that is not root cannot switch). *out is freed
 * with free(). Errors: AX_ECONFIG when root and the user does not
 * exist (the detail names worker.run_as and says how to create it),
 * AX_ENOMEM.
 */
ax_err ax_task_default_cred(const char *run_as, ax_exec_cred **out);

/*
 * The user for a task that asks for `want` ("" or NULL: the default).
 * *out points at p->dflt or at *own (malloc'd, the caller frees it).
 * Errors (the attempt must fail without running; the detail names the
 * user and the config key): AX_EPERM (not in worker.run_as_allowed, or
 * the worker is not root), AX_ENOENT (no such user here).
 */
ax_err ax_task_cred(const ax_task_policy *p, const char *want,
                    ax_exec_cred **own, const ax_exec_cred **out);

/* One env entry whose value the worker reads. */
typedef struct ax_task_env_src {
	const char *key;
	const char *from_file; /* or NULL */
	const char *from_env;  /* or NULL */
} ax_task_env_src;

/*
 * Reads the value of src into *out, malloc'd "KEY=VALUE" (the caller
 * wipes it with ax_task_env_wipe). A file must lie under
 * p->secrets_dir (after symlinks are resolved), be a regular file of at
 * most 64 KiB without NUL bytes; one trailing newline is dropped. A
 * variable must be named in p->secrets_env and set in the worker's
 * environment. Errors: AX_ENOENT (missing file or variable), AX_EPERM
 * (outside the directory, not listed, unreadable), AX_EINVAL (not a
 * regular file, too large, a NUL byte), AX_ENOMEM; the detail names
 * the key and the source, never the value.
 */
ax_err ax_task_env_read(const ax_task_policy *p, const ax_task_env_src *src,
                        char **out);

/* Overwrites and frees a string from ax_task_env_read. NULL is fine. */
void ax_task_env_wipe(char *s);

#endif /* AX_TASK_ENV_H */
