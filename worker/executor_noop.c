/*
 * executor_noop.c - the built-in `noop` task type: an attempt succeeds at
 * once, inside the worker, without a process.
 *
 * Role: lets `axctl bench` measure the scheduler (decision, dispatch,
 * result handling, persistence) without fork/exec costs. start() records
 * started_at == ended_at == now and queues a SUCCESS result; poll() hands
 * queued results out in start order. The eventfd is readable exactly while
 * results are queued, so the worker's loop wakes for them.
 * Invariant: head <= the number of queued results; a run_id is queued at
 * most once (a duplicate start is AX_EEXIST, as for the local executor).
 * Workload: up to tens of thousands of results per second.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"
#include "executor.h"

typedef struct noop {
	int             efd;  /* eventfd: readable while results wait */
	ax_exec_result *q;    /* queued results, q[head..len) pending */
	size_t          head; /* first pending result */
	size_t          len;  /* one past the last */
	size_t          cap;  /* allocated slots */
} noop;

static ax_err
noop_init(void **self)
{
	noop *nx = calloc(1, sizeof(*nx));
	if (nx == NULL)
		return ax_err_set(AX_ENOMEM, "noop executor: out of memory");
	nx->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (nx->efd < 0) {
		int e = errno;
		free(nx);
		return ax_err_set(AX_EIO, "noop executor: eventfd: %s",
		                  strerror(e));
	}
	*self = nx;
	return AX_OK;
}

static void
noop_fini(void *self)
{
	noop *nx = self;
	if (nx == NULL)
		return;
	close(nx->efd);
	free(nx->q);
	free(nx);
}

/* Whether run_id is queued and not yet polled. */
static int
noop_pending(const noop *nx, const char *run_id)
{
	for (size_t i = nx->head; i < nx->len; i++)
		if (strcmp(nx->q[i].run_id, run_id) == 0)
			return 1;
	return 0;
}

/* Makes room for one more result; compacts polled ones first. */
static ax_err
noop_reserve(noop *nx)
{
	if (nx->head > 0 && nx->head == nx->len)
		nx->head = nx->len = 0;
	if (nx->len < nx->cap)
		return AX_OK;
	if (nx->head > 0) {
		memmove(nx->q, nx->q + nx->head,
		        (nx->len - nx->head) * sizeof(*nx->q));
		nx->len -= nx->head;
		nx->head = 0;
		return AX_OK;
	}
	size_t          ncap = nx->cap ? nx->cap * 2 : 64;
	ax_exec_result *nq   = realloc(nx->q, ncap * sizeof(*nq));
	if (nq == NULL)
		return ax_err_set(AX_ENOMEM, "noop executor: out of memory");
	nx->q   = nq;
	nx->cap = ncap;
	return AX_OK;
}

static ax_err
noop_start(void *self, const ax_exec_spec *spec)
{
	noop  *nx = self;
	ax_err rv;
	size_t idlen;

	if (spec->run_id == NULL || spec->run_id[0] == '\0')
		return ax_err_set(AX_EINVAL, "attempt spec: run_id is empty");
	if ((idlen = strlen(spec->run_id)) >= AX_EXEC_RUN_ID_MAX)
		return ax_err_set(AX_EINVAL,
		                  "attempt spec: run_id is %zu bytes long, "
		                  "the limit is %d",
		                  idlen, AX_EXEC_RUN_ID_MAX - 1);
	if (noop_pending(nx, spec->run_id))
		return ax_err_set(AX_EEXIST, "attempt %s is already running",
		                  spec->run_id);
	if ((rv = noop_reserve(nx)) != AX_OK)
		return rv;

	ax_exec_result *r = &nx->q[nx->len++];
	memset(r, 0, sizeof(*r));
	memcpy(r->run_id, spec->run_id, idlen + 1);
	r->user       = spec->user;
	r->status     = AX_EXEC_SUCCESS;
	r->started_at = ax_clock_utc_us();
	r->ended_at   = r->started_at;
	if (spec->started_at != NULL)
		*spec->started_at = r->started_at;

	uint64_t one = 1;
	if (write(nx->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		return ax_err_set(AX_EIO, "noop executor: eventfd write: %s",
		                  strerror(errno));
	return AX_OK;
}

static ax_err
noop_kill(void *self, const char *run_id, int64_t grace_us)
{
	(void) grace_us;
	/* A noop attempt has ended by the time start() returns. */
	return ax_err_set(AX_ENOENT, "attempt %s is not running", run_id);
}

static int
noop_fd(void *self)
{
	return ((noop *) self)->efd;
}

static int64_t
noop_next_deadline(void *self)
{
	const noop *nx = self;
	/* Results left behind by a short poll(): come back at once. */
	return nx->head < nx->len ? 0 : INT64_MAX;
}

static ax_err
noop_poll(void *self, int64_t now_us, ax_exec_result *out, size_t cap,
          size_t *n)
{
	noop    *nx = self;
	uint64_t cnt;
	size_t   k = nx->len - nx->head;

	if (k > cap)
		k = cap;
	if (k > 0)
		memcpy(out, nx->q + nx->head, k * sizeof(*out));
	nx->head += k;
	*n = k;
	if (nx->head == nx->len) {
		nx->head = nx->len = 0;
		/* drain the eventfd: nothing waits any more */
		if (read(nx->efd, &cnt, sizeof(cnt)) < 0 && errno != EAGAIN)
			return ax_err_set(AX_EIO,
			                  "noop executor: eventfd read: %s",
			                  strerror(errno));
	}
	return AX_OK;
}

static size_t
noop_running(void *self)
{
	const noop *nx = self;
	return nx->len - nx->head;
}

const ax_exec_ops ax_exec_noop_ops = {
	.name          = "noop",
	.init          = noop_init,
	.fini          = noop_fini,
	.start         = noop_start,
	.kill          = noop_kill,
	.fd            = noop_fd,
	.next_deadline = noop_next_deadline,
	.poll          = noop_poll,
	.running       = noop_running,
};
