/*
 * actor_ipc_peer.c - the other process of test_actor_ipc.c.
 *
 * Usage: actor_ipc_peer MY_URL ORIGIN_URL COUNT
 * Runs actor "peer" on MY_URL with a route "origin" -> ORIGIN_URL. It
 * echoes every item it receives back to "origin" (checking that items
 * arrive in the order sent), sends COUNT items of its own to "origin",
 * and exits when it receives the BYE item. Exit status: 0 ok, 2 usage or
 * setup error, 3 items out of order, 4 timeout.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actor.h"
#include "clock.h"

#define ITEM_SEQ (AX_ITEM_USER + 0)
#define ITEM_BYE (AX_ITEM_USER + 1)

typedef struct peer {
	uint32_t    next; /* next expected sequence from the origin */
	_Atomic int bad;
	_Atomic int bye;
} peer;

static ax_err
peer_handle(ax_actor *self, void *state, const ax_actor_item *items, size_t n)
{
	peer *p = state;
	for (size_t i = 0; i < n; i++) {
		uint32_t v[2];
		if (items[i].type == ITEM_BYE) {
			atomic_store(&p->bye, 1);
			continue;
		}
		if (items[i].type != ITEM_SEQ || items[i].len != sizeof(v)) {
			atomic_store(&p->bad, 1);
			continue;
		}
		memcpy(v, items[i].data, sizeof(v));
		if (v[1] != p->next++)
			atomic_store(&p->bad, 1);
		ax_err rv =
		    ax_actor_send(self, "origin", ITEM_SEQ, v, sizeof(v));
		if (rv != AX_OK)
			return rv;
	}
	return AX_OK;
}

int
main(int argc, char **argv)
{
	static const ax_actor_ops ops = { .handle = peer_handle };
	static peer               st;
	ax_actor_system          *sys = NULL;
	ax_actor_client          *c   = NULL;
	ax_actor_config           cfg = { .name = "peer" };
	uint32_t                  count;
	int                       status = 0;

	if (argc != 4)
		return 2;
	cfg.url = argv[1];
	count   = (uint32_t) strtoul(argv[3], NULL, 10);
	if (ax_actor_system_new(&sys) != AX_OK ||
	    ax_actor_system_add(sys, &cfg, &ops, &st, NULL) != AX_OK ||
	    ax_actor_system_route(sys, "origin", argv[2]) != AX_OK ||
	    ax_actor_system_start(sys) != AX_OK ||
	    ax_actor_client_new(sys, "peer-main", &c) != AX_OK) {
		fprintf(stderr, "peer: setup: %s\n", ax_err_detail());
		return 2;
	}
	for (uint32_t i = 0; i < count; i++) {
		uint32_t      v[2] = { 1, i }; /* sender 1: the peer itself */
		ax_actor_item it   = { .type = ITEM_SEQ,
			               .len  = sizeof(v),
			               .data = v };
		if (ax_actor_client_send(c, "origin", &it, 1, 0) != AX_OK) {
			fprintf(stderr, "peer: send: %s\n", ax_err_detail());
			return 2;
		}
	}
	int64_t end = ax_clock_mono_us() + 60 * AX_USEC_PER_SEC;
	while (!atomic_load(&st.bye) && ax_clock_mono_us() < end)
		ax_clock_sleep_us(2000);
	if (!atomic_load(&st.bye))
		status = 4;
	else if (atomic_load(&st.bad) || st.next != count)
		status = 3;
	ax_actor_client_free(c);
	ax_actor_system_free(sys);
	return status;
}
