/*
 * executor.c - the executor plug-in point: dispatch from ax_exec_* to the
 * ops table of one executor kind, plus helpers shared by all kinds.
 *
 * Role: ax-worker owns one ax_exec per task type it serves. Invariant:
 * ex->ops and ex->self are set together by ax_exec_new and never change.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "executor.h"

struct ax_exec {
	const ax_exec_ops *ops;
	void              *self; /* owned; freed by ops->fini */
};

const ax_exec_ops *
ax_exec_ops_find(const char *type)
{
	static const ax_exec_ops *const all[] = {
		&ax_exec_local_ops,
		&ax_exec_noop_ops,
	};
	if (type == NULL)
		return NULL;
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (strcmp(all[i]->name, type) == 0)
			return all[i];
	return NULL;
}

ax_err
ax_exec_new(const ax_exec_ops *ops, ax_exec **out)
{
	ax_exec *ex;
	ax_err   rv;

	if (ops == NULL || out == NULL)
		return ax_err_set(AX_EINVAL, "ax_exec_new: NULL argument");
	if ((ex = calloc(1, sizeof(*ex))) == NULL)
		return ax_err_set(AX_ENOMEM, "executor %s: out of memory",
		                  ops->name);
	ex->ops = ops;
	if ((rv = ops->init(&ex->self)) != AX_OK) {
		free(ex);
		return rv;
	}
	*out = ex;
	return AX_OK;
}

void
ax_exec_free(ax_exec *ex)
{
	if (ex == NULL)
		return;
	ex->ops->fini(ex->self);
	free(ex);
}

const ax_exec_ops *
ax_exec_ops_of(const ax_exec *ex)
{
	return ex->ops;
}

ax_err
ax_exec_start(ax_exec *ex, const ax_exec_spec *spec)
{
	if (ex == NULL || spec == NULL)
		return ax_err_set(AX_EINVAL, "ax_exec_start: NULL argument");
	return ex->ops->start(ex->self, spec);
}

size_t
ax_exec_usage_now(ax_exec *ex, ax_exec_usage *out, size_t cap)
{
	if (ex == NULL || ex->ops->usage == NULL || out == NULL || cap == 0)
		return 0;
	return ex->ops->usage(ex->self, out, cap);
}

ax_err
ax_exec_kill(ax_exec *ex, const char *run_id, int64_t grace_us)
{
	if (ex == NULL || run_id == NULL)
		return ax_err_set(AX_EINVAL, "ax_exec_kill: NULL argument");
	return ex->ops->kill(ex->self, run_id, grace_us > 0 ? grace_us : 0);
}

int
ax_exec_fd(const ax_exec *ex)
{
	return ex->ops->fd(ex->self);
}

int64_t
ax_exec_next_deadline(const ax_exec *ex)
{
	return ex->ops->next_deadline(ex->self);
}

ax_err
ax_exec_poll(ax_exec *ex, int64_t now_us, ax_exec_result *out, size_t cap,
             size_t *n)
{
	if (ex == NULL || n == NULL || (out == NULL && cap > 0))
		return ax_err_set(AX_EINVAL, "ax_exec_poll: NULL argument");
	*n = 0;
	return ex->ops->poll(ex->self, now_us, out, cap, n);
}

size_t
ax_exec_running(const ax_exec *ex)
{
	return ex->ops->running(ex->self);
}

void
ax_exec_set_lease(ax_exec *ex, int64_t deadline_mono_us)
{
	if (ex != NULL && ex->ops->set_lease != NULL)
		ex->ops->set_lease(ex->self, deadline_mono_us);
}

void
ax_exec_fence(ax_exec *ex, int64_t lapsed_at_mono_us)
{
	if (ex != NULL && ex->ops->fence != NULL)
		ex->ops->fence(ex->self, lapsed_at_mono_us);
}

ax_err
ax_exec_set_state_dir(ax_exec *ex, const char *dir)
{
	if (ex == NULL || dir == NULL)
		return ax_err_set(AX_EINVAL,
		                  "ax_exec_set_state_dir: NULL argument");
	if (ex->ops->set_state_dir == NULL)
		return ax_err_set(AX_EINVAL,
		                  "executor %s keeps no state records",
		                  ex->ops->name);
	return ex->ops->set_state_dir(ex->self, dir);
}

ax_err
ax_exec_use_cgroups(ax_exec *ex)
{
	if (ex == NULL)
		return ax_err_set(AX_EINVAL,
		                  "ax_exec_use_cgroups: NULL argument");
	if (ex->ops->use_cgroups == NULL)
		return ax_err_set(AX_EINVAL, "executor %s runs no processes",
		                  ex->ops->name);
	return ex->ops->use_cgroups(ex->self);
}

void
ax_exec_limits_from_resources(double cpu, int64_t memory_bytes,
                              int64_t timeout_us, ax_exec_limits *out)
{
	out->address_space = memory_bytes > 0 ? memory_bytes : 0;
	out->cpu_seconds   = 0;
	if (cpu > 0 && timeout_us > 0) {
		double s = ceil(cpu * (double) timeout_us / 1e6);
		/* clamp before converting: a huge product is not an int64 */
		out->cpu_seconds = s < 1 ? 1 : s > 1e15 ? 0 : (int64_t) s;
	}
}

const char *
ax_exec_status_name(ax_exec_status s)
{
	switch (s) {
	case AX_EXEC_SUCCESS:
		return "SUCCESS";
	case AX_EXEC_FAILED:
		return "FAILED";
	case AX_EXEC_TIMEOUT:
		return "TIMEOUT";
	case AX_EXEC_KILLED:
		return "KILLED";
	case AX_EXEC_FENCED:
		return "FENCED";
	}
	return "UNKNOWN";
}
