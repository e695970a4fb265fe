/*
 * test_actor_ipc.c - two actors in two processes over ipc://.
 *
 * This process runs actor "origin"; a second process (the
 * actor_ipc_peer binary, path in $AX_ACTOR_PEER, fork+exec'd) runs actor
 * "peer". Items flow both ways: the origin sends COUNT numbered items to
 * the peer, which checks their order and echoes them back; the peer also
 * sends COUNT items of its own. The origin checks both streams arrive
 * complete and in order, then says BYE and the peer exits 0.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "actor.h"
#include "clock.h"

#define ITEM_SEQ (AX_ITEM_USER + 0)
#define ITEM_BYE (AX_ITEM_USER + 1)
#define COUNT    5000

typedef struct origin {
	uint32_t         next[2]; /* [0] echoes of ours, [1] peer's own */
	_Atomic uint64_t n[2];
	_Atomic int      bad;
	_Atomic uint64_t batched; /* items that arrived in batches > 1 */
} origin;

static ax_err
origin_handle(ax_actor *self, void *state, const ax_actor_item *items,
              size_t n)
{
	origin *o = state;
	for (size_t i = 0; i < n; i++) {
		uint32_t v[2];
		if (items[i].type != ITEM_SEQ || items[i].len != sizeof(v) ||
		    (strcmp(items[i].from, "peer") != 0 &&
		     strcmp(items[i].from, "peer-main") != 0)) {
			atomic_store(&o->bad, 1);
			continue;
		}
		memcpy(v, items[i].data, sizeof(v));
		if (v[0] > 1 || v[1] != o->next[v[0]]) {
			atomic_store(&o->bad, 1);
			continue;
		}
		o->next[v[0]]++;
		atomic_fetch_add(&o->n[v[0]], 1);
	}
	if (n > 1)
		atomic_fetch_add(&o->batched, n);
	return AX_OK;
}

Test(actor_ipc, two_processes_exchange_ordered_batches, .timeout = 120)
{
	static const ax_actor_ops ops = { .handle = origin_handle };
	static origin             st;
	const char               *peer_bin = getenv("AX_ACTOR_PEER");
	char                      url_o[128], url_p[128], count[16];
	ax_actor_system          *sys = NULL;
	ax_actor_client          *c   = NULL;
	ax_actor_config           cfg = { .name = "origin", .url = url_o };
	pid_t                     pid;
	int                       wst;

	cr_assert_not_null(peer_bin, "AX_ACTOR_PEER not set");
	snprintf(url_o, sizeof(url_o), "ipc:///tmp/ax-actor-test-%d-o.sock",
	         (int) getpid());
	snprintf(url_p, sizeof(url_p), "ipc:///tmp/ax-actor-test-%d-p.sock",
	         (int) getpid());
	snprintf(count, sizeof(count), "%d", COUNT);
	cr_assert_eq(ax_actor_system_new(&sys), AX_OK);
	cr_assert_eq(ax_actor_system_add(sys, &cfg, &ops, &st, NULL), AX_OK);
	cr_assert_eq(ax_actor_system_route(sys, "peer", url_p), AX_OK);
	cr_assert_eq(ax_actor_system_start(sys), AX_OK, "%s", ax_err_detail());

	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		execl(peer_bin, peer_bin, url_p, url_o, count, (char *) NULL);
		_exit(127);
	}
	cr_assert_eq(ax_actor_client_new(sys, "origin-main", &c), AX_OK);
	for (uint32_t i = 0; i < COUNT; i++) {
		uint32_t      v[2] = { 0, i };
		ax_actor_item it   = { .type = ITEM_SEQ,
			               .len  = sizeof(v),
			               .data = v };
		cr_assert_eq(ax_actor_client_send(c, "peer", &it, 1, 0), AX_OK,
		             "%s", ax_err_detail());
	}
	int64_t end = ax_clock_mono_us() + 60 * AX_USEC_PER_SEC;
	while (
	    (atomic_load(&st.n[0]) < COUNT || atomic_load(&st.n[1]) < COUNT) &&
	    !atomic_load(&st.bad) && ax_clock_mono_us() < end)
		ax_clock_sleep_us(2000);
	cr_expect_eq(atomic_load(&st.bad), 0, "item out of order or foreign");
	cr_expect_eq(atomic_load(&st.n[0]), COUNT, "echoes: %llu",
	             (unsigned long long) atomic_load(&st.n[0]));
	cr_expect_eq(atomic_load(&st.n[1]), COUNT, "peer's own: %llu",
	             (unsigned long long) atomic_load(&st.n[1]));

	ax_actor_item bye = { .type = ITEM_BYE, .len = 0, .data = "" };
	cr_assert_eq(ax_actor_client_send(c, "peer", &bye, 1, 0), AX_OK);
	for (int i = 0; i < 10000 && waitpid(pid, &wst, WNOHANG) == 0; i++)
		ax_clock_sleep_us(2000);
	if (waitpid(pid, &wst, WNOHANG) == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &wst, 0);
		cr_assert_fail("peer did not exit after BYE");
	}
	cr_assert(WIFEXITED(wst), "peer crashed");
	cr_assert_eq(WEXITSTATUS(wst), 0,
	             "peer exit %d (3: out of order, 4: timeout)",
	             WEXITSTATUS(wst));
	ax_actor_client_free(c);
	ax_actor_system_free(sys);
}
