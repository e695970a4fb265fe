/*
 * test_routing.c - the consistent-hash ring gives every process and every
 * version the same worker for a key: owners fixed here were computed
 * independently (Python) from the hash definition (engine/hash.h) and
 * the ring layout (64 points "worker#v" per worker, first point at or
 * after the key's hash, wrapping). A change to the hash or the ring shows
 * here before it moves sticky attempts between workers.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "routing.h"

Test(routing, ring_owners_are_fixed)
{
	static const char *want[16] = {
		"worker-b", "worker-c", "worker-c", "worker-b",
		"worker-c", "worker-c", "worker-b", "worker-c",
		"worker-a", "worker-c", "worker-b", "worker-c",
		"worker-b", "worker-c", "worker-b", "worker-b",
	};
	ax_routing_ring r = { 0 };
	char            key[32];

	cr_assert_null(ax_routing_ring_lookup(&r, "run-0"));
	/* join order must not matter */
	cr_assert_eq(ax_routing_ring_add(&r, "worker-c"), AX_OK);
	cr_assert_eq(ax_routing_ring_add(&r, "worker-a"), AX_OK);
	cr_assert_eq(ax_routing_ring_add(&r, "worker-b"), AX_OK);
	cr_assert_eq(ax_routing_ring_add(&r, "worker-b"), AX_OK); /* dup */
	for (int k = 0; k < 16; k++) {
		snprintf(key, sizeof(key), "run-%d", k);
		cr_assert_str_eq(ax_routing_ring_lookup(&r, key), want[k],
		                 "%s", key);
	}
	/* worker-a leaving moves only its own keys */
	cr_assert_eq(ax_routing_ring_remove(&r, "worker-a"), AX_OK);
	for (int k = 0; k < 16; k++) {
		snprintf(key, sizeof(key), "run-%d", k);
		if (strcmp(want[k], "worker-a") != 0)
			cr_assert_str_eq(ax_routing_ring_lookup(&r, key),
			                 want[k], "%s moved", key);
	}
	ax_routing_ring_fini(&r);
}
