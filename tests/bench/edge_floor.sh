#!/bin/sh
# tests/bench/edge_floor.sh - what one chain edge's transactions cost on
# this machine's PostgreSQL alone, without AX: the floor under
# `axctl bench --scenario chain`.
#
#   tests/bench/edge_floor.sh SOCKET_DIR [SECONDS] [ROUNDS]
#   e.g. after `axctl bench --scenario chain --home H` and
#   `su postgres -c "pg_ctl -D H/pg/data start"`:
#   sh tests/bench/edge_floor.sh H/pg/run 15 2
#
# Runs pgbench (user ax, database ax) at 200 sequences a second, each
# sequence three transactions of one row like an edge's (the result's,
# the admission's, the dispatch record's), in three shapes, alternating:
#   two_durable  the result and the dispatch record wait for the WAL
#                flush, the admission does not (AX before the relaxed
#                result);
#   one_durable  only the dispatch record waits (AX since);
#   merged       two transactions: the result (relaxed) and a dispatch
#                record that also admits (waits for the flush), the
#                shape of the admission merged into the dispatch record.
# Prints P50 and P99 of the sequence's latency per shape and round, in
# ms. Works in a table of its own (edge_floor_t), dropped at the end.
set -eu

. "$(dirname "$0")/floor_args.sh"
floor_args "" 15 2 "$@"
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"; psql -h "$SOCK" -U ax -d ax -qc "DROP TABLE IF EXISTS edge_floor_t" >/dev/null 2>&1 || true' EXIT

psql -h "$SOCK" -U ax -d ax -qc "DROP TABLE IF EXISTS edge_floor_t;
CREATE TABLE edge_floor_t (id int PRIMARY KEY, v bigint);
INSERT INTO edge_floor_t VALUES (1, 0), (2, 0), (3, 0)" >/dev/null

# The statements of row $1: its lock, its write.
lock() { echo "SELECT v FROM edge_floor_t WHERE id = $1 FOR UPDATE;"; }
bump() { echo "UPDATE edge_floor_t SET v = v + 1 WHERE id = $1;"; }
# A transaction of the lines given (an empty one is left out).
tx() {
	echo "BEGIN;"
	for l in "$@"; do [ -z "$l" ] || echo "$l"; done
	echo "COMMIT;"
}
RELAXED="SET LOCAL synchronous_commit TO off;"

# $1: the result's durability line (empty: durable); then the
# admission (relaxed) and the dispatch record (durable).
three() {
	tx "$1" "$(lock 1)" "$(bump 1)"
	tx "$RELAXED" "$(lock 2)" "$(bump 2)"
	tx "$(bump 3)"
}
three "" >"$DIR/two_durable.sql"
three "$RELAXED" >"$DIR/one_durable.sql"
{
	tx "$RELAXED" "$(lock 1)" "$(bump 1)"
	tx "$(lock 2)" "$(bump 2)" "$(bump 3)"
} >"$DIR/merged.sql"

r=1
while [ "$r" -le "$ROUNDS" ]; do
	for s in two_durable one_durable merged; do
		rm -f "$DIR"/pgbench_log.*
		(cd "$DIR" && "$BIN/pgbench" -h "$SOCK" -U ax -n -M prepared \
			-f "$DIR/$s.sql" -R 200 -T "$SECS" -l ax >/dev/null 2>&1)
		cat "$DIR"/pgbench_log.* | awk '{print $3}' | sort -n |
			awk -v s="$s" -v r="$r" '{a[NR] = $1} END {
				printf "round %d %-12s n=%d p50_ms=%.3f p99_ms=%.3f\n",
				    r, s, NR, a[int(NR * 0.5)] / 1000,
				    a[int(NR * 0.99)] / 1000 }'
	done
	r=$((r + 1))
done
