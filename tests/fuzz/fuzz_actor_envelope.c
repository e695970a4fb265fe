/*
 * fuzz_actor_envelope.c - libFuzzer target for what an actor does with
 * bytes from its nng inbox (engine/actor.c, actors/pipeline.c): the
 * envelope framing, the batching of queued envelopes, and the unpacking
 * of AX_ITEM_COMMAND items into ax.Command (commands.proto).
 *
 * Input: a sequence of envelopes, each a big-endian u16 length and that
 * many bytes (the last takes what is left). Every input is run twice:
 *  1. through ax_actor_env_count() and ax_actor_env_parse() directly,
 *     checking that they agree, that items lie inside the envelope and
 *     that every command item that unpacks packs and unpacks again;
 *  2. as raw nng messages to a real actor's inbox (inproc, one system
 *     for the whole run), whose handler unpacks every command item with
 *     ax_pipeline_unpack() as the pipeline actors do; the run waits
 *     until the actor has taken every envelope, so envelopes queued
 *     together go through one batch as they do under load.
 * Never a crash, an overflow, a leak or UB; a batch never exceeds the
 * actor's item array (ASan sees it).
 *
 * Run: build with the `fuzz` feature (clang), then
 *   build/tests/fuzz/fuzz_actor_envelope -max_total_time=20 \
 *       tests/fuzz/corpus_actor_envelope
 */
#include <nng/nng.h>
#include <nng/protocol/pipeline0/push.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "actor.h"
#include "clock.h"
#include "commands.pb-c.h"
#include "log.h"
#include "pipeline.h"

#define MAX_ENVELOPES 32 /* below the inbox depth: sends never block */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static _Atomic uint64_t commands_unpacked;

/* Re-packs an unpacked command and unpacks it again: what an actor that
 * forwards a command does, and a check of protobuf-c's own invariants. */
static void
repack(const Ax__Command *cmd)
{
	size_t   n = ax__command__get_packed_size(cmd);
	uint8_t *b = malloc(n ? n : 1);

	if (b == NULL)
		return;
	if (ax__command__pack(cmd, b) != n)
		__builtin_trap();
	Ax__Command *again = ax__command__unpack(NULL, n, b);
	if (again == NULL || again->body_case != cmd->body_case)
		__builtin_trap();
	ax__command__free_unpacked(again, NULL);
	free(b);
}

static ax_err
victim_handle(ax_actor *self, void *state, const ax_actor_item *items,
              size_t n)
{
	(void) state;
	if (n > AX_ACTOR_ENVELOPE_MAX_ITEMS)
		__builtin_trap(); /* default max_batch: the array's size */
	for (size_t i = 0; i < n; i++) {
		if (items[i].type != AX_ITEM_COMMAND)
			continue;
		Ax__Command *cmd = ax_pipeline_unpack(self, &items[i]);
		if (cmd == NULL)
			continue;
		atomic_fetch_add(&commands_unpacked, 1);
		repack(cmd);
		ax__command__free_unpacked(cmd, NULL);
	}
	return AX_OK;
}

static const ax_actor_ops victim_ops = { .handle = victim_handle };

static ax_actor  *victim;
static nng_socket raw;

/* One actor system for the whole fuzzing process. */
static int
setup(void)
{
	static int       done, ok;
	ax_actor_system *sys = NULL;
	ax_actor_config  cfg = { .name = "victim", .inbox_depth = 64 };

	if (done)
		return ok;
	done = 1;
	ax_log_init(AX_LOG_ERROR, 2); /* BAD_ENVELOPE warnings: quiet */
	if (ax_actor_system_new(&sys) != AX_OK ||
	    ax_actor_system_add(sys, &cfg, &victim_ops, NULL, &victim) !=
	        AX_OK ||
	    ax_actor_system_start(sys) != AX_OK)
		return 0;
	if (nng_push0_open(&raw) != 0 ||
	    nng_dial(raw, ax_actor_url(victim), NULL, 0) != 0)
		return 0;
	ok = 1;
	return ok;
}

static void
check_direct(const uint8_t *b, size_t len)
{
	static ax_actor_item items[AX_ACTOR_ENVELOPE_MAX_ITEMS];
	char                 name[AX_ACTOR_NAME_MAX + 1];
	uint64_t             sysid = 0;
	size_t               n     = 0;
	uint32_t             c     = ax_actor_env_count(b, len);

	if (c > AX_ACTOR_ENVELOPE_MAX_ITEMS)
		__builtin_trap();
	if (ax_actor_env_parse(b, len, name, &sysid, items,
	                       AX_ACTOR_ENVELOPE_MAX_ITEMS, &n) != AX_OK) {
		if (n != 0)
			__builtin_trap();
		return;
	}
	if (n != c || strlen(name) > AX_ACTOR_NAME_MAX)
		__builtin_trap();
	for (size_t i = 0; i < n; i++) {
		const uint8_t *d = items[i].data;
		if (d < b || d + items[i].len > b + len ||
		    items[i].from != name)
			__builtin_trap();
		if (items[i].type != AX_ITEM_COMMAND)
			continue;
		Ax__Command *cmd = ax__command__unpack(NULL, items[i].len, d);
		if (cmd != NULL) {
			repack(cmd);
			ax__command__free_unpacked(cmd, NULL);
		}
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *env[MAX_ENVELOPES];
	size_t         len[MAX_ENVELOPES], k = 0;
	ax_actor_stats st;

	while (size > 0 && k < MAX_ENVELOPES) {
		size_t l = size >= 2 ? (size_t) data[0] << 8 | data[1] : 0;
		size_t h = size >= 2 ? 2 : size;
		if (l > size - h || k == MAX_ENVELOPES - 1)
			l = size - h;
		env[k]   = data + h;
		len[k++] = l;
		data += h + l;
		size -= h + l;
	}
	for (size_t i = 0; i < k; i++)
		check_direct(env[i], len[i]);
	if (!setup())
		return 0;
	ax_actor_stats_get(victim, &st);
	uint64_t want = st.envelopes_in + st.bad_envelopes + k;
	for (size_t i = 0; i < k; i++)
		if (nng_send(raw, (void *) env[i], len[i], 0) != 0)
			want--;
	/* the actor took every envelope (a lost one would hang: the
	 * -timeout of the run reports it) */
	for (;;) {
		ax_actor_stats_get(victim, &st);
		if (st.envelopes_in + st.bad_envelopes >= want)
			break;
		sched_yield();
	}
	return 0;
}
