#!/bin/sh
# tests/bench/throughput_floor.sh - what one instance's rows cost on this
# machine's PostgreSQL alone, without AX: the ceiling over
# `axctl bench --scenario throughput`.
#
#   tests/bench/throughput_floor.sh SOCKET_DIR [SECONDS] [ROUNDS] [BATCH]
#   e.g. after `axctl bench --scenario throughput --home H` and
#   `su postgres -c "pg_ctl -D H/pg/data start"`:
#   sh tests/bench/throughput_floor.sh H/pg/run 15 3 128
#
# Runs pgbench (user ax, database ax) on AX's own tables, with their
# indexes, triggers and foreign keys, each script a batch of BATCH
# (default 128, the slots of the throughput bench; AX's own batches there
# hold 80-280 rows) new instances taken from PENDING
# to SUCCESS in transactions shaped like the pipeline's, with the event
# rows of the throughput bench (instance.delayed, .admitted, .running,
# .succeeded, payloads as AX writes them). Three shapes, alternating:
#   today  what AX writes now: the plan's insert and the delayed events
#          (relaxed), the admission (attempt inserted QUEUED, instance
#          READY, admitted events; relaxed), the dispatch record (the
#          attempt DISPATCHED; waits for the flush), the result (the
#          instance SUCCESS, the attempt, two events; relaxed): 3
#          instance versions, 3 attempt versions, 4 event rows;
#   lean   the fewest writes the issue's guarantees allow: the plan
#          (relaxed), one dispatch record that inserts the attempt
#          DISPATCHED and moves the instance READY with its admitted
#          event (waits for the flush), the result (relaxed): 2 instance
#          versions, 2 attempt versions, 4 event rows;
#   lean_noev  lean without its event rows (which the guarantees
#          require): what the event log costs.
# And, for a decision on the event contract, shapes that the guarantees
# as written do not allow (not run unless SHAPES names them):
#   lean_3ev   lean without the instance.running rows (the start kept on
#              the attempt row only);
#   lean_2ev   lean without instance.running and instance.admitted;
#   lean_copy  lean with its events in floor_event_log, a fresh copy of
#              event_log (partitioned, every index), the reference for:
#   lean_4idx  the same without the DAG and type indexes (migration
#              0020, the events page's filters).
# CLIENTS (default 2, the cores here) connections run scripts at once;
# SHAPES picks shapes. The machine's speed drifts: set the figures
# against `axctl bench --scenario throughput` runs made in between.
# Prints instances per second per shape and round (scripts per second x
# BATCH) and the machine's CPU per instance over the run (from
# /proc/stat, all processes), with every core left to PostgreSQL. The
# instances and attempts are deleted after each run (the event rows stay:
# event_log refuses deletes; the bench's cluster is a throwaway).
set -eu

. "$(dirname "$0")/floor_args.sh"
floor_args "[BATCH]" 20 2 "$@"
B=${4:-128}
CLIENTS=${CLIENTS:-2}
floor_count BATCH "$B"
floor_count CLIENTS "$CLIENTS"
DIR=$(mktemp -d)
SHAPES=${SHAPES:-today lean lean_noev}
SKIP=""        # event types left out; "all": every one
EVT=event_log  # the table the events go to
PSQL="psql -h $SOCK -U ax -d ax -qAt"
PSQL_ERR="psql -h $SOCK -U ax -d ax -qAt -v ON_ERROR_STOP=1"
trap 'rm -rf "$DIR"; $PSQL -c "DROP TABLE IF EXISTS floor_event_log,
	floor_event_log_4" >/dev/null 2>&1 || true' EXIT

# A run of its own in the cluster's first DAG, for the foreign keys.
DAG=$($PSQL -c "SELECT dag_id FROM dag_versions ORDER BY id LIMIT 1" \
	2>/dev/null || true)
[ -n "$DAG" ] || {
	echo "throughput_floor.sh: no AX database with a DAG at $SOCK:" \
	    "run \`axctl bench --scenario throughput --home H\` and start" \
	    "its cluster (pg_ctl -D H/pg/data), then pass H/pg/run" >&2
	exit 1
}
# The run is written ended, so an axd started on the cluster later
# leaves it alone.
RUN=$($PSQL -c "INSERT INTO dag_runs (dag_id, dag_version_id, run_type,
	logical_date, interval_start, interval_end, state, started_at,
	ended_at)
	SELECT dag_id, id, 'manual', now(), now(), now(), 'SUCCESS', now(),
	now() FROM dag_versions WHERE dag_id = $DAG ORDER BY id LIMIT 1
	RETURNING id" | head -1)

# Event payloads as AX writes them (one instance of the throughput
# bench); X is replaced per row, so each row's JSON is parsed.
P_DEL='{"dag": "bench.tp", "pool": "", "task": "tX", "tier": "P2", "group": "default", "slots": 1, "until": null, "source": "resource_detector", "held_by": "group_slots", "cpu_milli": 0, "level_pct": 0, "pool_used": 0, "group_used": 256, "pool_slots": 0, "group_limit": 256, "shard_index": 256, "shard_total": 1000, "memory_bytes": 0, "calendar_slots": -1, "group_cpu_used": 0, "group_used_low": 256, "logical_time_us": 1796616060399900, "pool_reserve_p0": 0, "group_memory_used": 0}'
P_ADM='{"to": "READY", "dag": "bench.tp", "from": "PENDING", "task": "tX", "source": "instance_generator", "shard_index": 0, "shard_total": 1000, "decided_at_us": 1796616060453057, "logical_time_us": 1796616060399900}'
P_RUN='{"to": "RUNNING", "dag": "bench.tp", "from": "READY", "task": "tX", "source": "result_handler", "shard_index": 0, "shard_total": 1000, "logical_time_us": 1796616060399900}'
P_SUC='{"to": "SUCCESS", "dag": "bench.tp", "from": "RUNNING", "task": "tX", "report": {"status": "SUCCESS", "worker": "standalone-2", "log_path": "/var/lib/ax/logs/tasks/bench.tp/t0/20261207T040100Z/0/1.log"}, "source": "result_handler", "shard_index": 0, "shard_total": 1000, "logical_time_us": 1796616060399900}'

# Ids as AX's (uuid version 7) are time-ordered: here from the instance
# id, which only grows (run ids: k 0; event ids: k 1..4, one per type).
uuid() {
	echo "lpad(to_hex(t.id * 8 + $1), 32, '0')::uuid"
}

# $1 type, $2 payload, $3 the rows (a FROM clause over t), $4 uuid's k
events() {
	case " $SKIP " in *" $1 "* | *" all "*) return 0 ;; esac
	cat <<EOF
INSERT INTO $EVT (event_id, type, dag_id, dag_run_id, instance_id,
	run_id, attempt, trace_id, reason, payload)
SELECT $(uuid $4), '$1', $DAG, $RUN, t.id, NULL, 1,
	'0af7651916cd43dd8448eb211c80319c',
	NULL, replace('$2', 'tX', 't' || t.id)::jsonb FROM $3;
EOF
}
ROWS="task_instances t WHERE t.id BETWEEN :lo AND :hi
	AND t.task = 'c' || :client_id"

plan() {
	cat <<EOF
BEGIN;
SET LOCAL synchronous_commit TO off;
WITH ins AS (INSERT INTO task_instances (dag_run_id, dag_id, task,
	logical_time, shard, shard_total, reason)
	SELECT $RUN, $DAG, 'c' || :client_id,
	clock_timestamp() + g * interval '1 microsecond', 0, 1,
	'WAIT_RESOURCE' FROM generate_series(1, $B) g RETURNING id)
SELECT min(id) AS lo, max(id) AS hi FROM ins \gset
COMMIT;
BEGIN;
SET LOCAL synchronous_commit TO off;
$(events instance.delayed "$P_DEL" "$ROWS" 1)
COMMIT;
EOF
}

result() {
	cat <<EOF
BEGIN;
SET LOCAL synchronous_commit TO off;
SELECT count(*) FROM (SELECT t.id FROM $ROWS ORDER BY t.id FOR UPDATE) l;
UPDATE task_instances t SET state = 'SUCCESS', started_at = now(),
	ended_at = now(), updated_at = now() WHERE t.id BETWEEN :lo AND :hi
	AND t.task = 'c' || :client_id;
UPDATE attempts a SET state = 'SUCCESS', started_at = now(),
	ended_at = now(), exit_status = 0, log_path = '/tmp/x/1.log'
	WHERE a.instance_id BETWEEN :lo AND :hi AND a.number = 1;
$(events instance.running "$P_RUN" "$ROWS" 3)
$(events instance.succeeded "$P_SUC" "$ROWS" 4)
COMMIT;
EOF
}

{
	plan
	cat <<EOF
BEGIN;
SET LOCAL synchronous_commit TO off;
SELECT count(*) FROM (SELECT t.id FROM $ROWS ORDER BY t.id FOR UPDATE) l;
INSERT INTO attempts (run_id, instance_id, number, due_at, admitted_at)
	SELECT $(uuid 0), t.id, 1, now(), now() FROM $ROWS ORDER BY t.id;
UPDATE task_instances t SET try_number = 1, state = 'READY',
	reason = NULL, ready_at = now(), updated_at = now()
	WHERE t.id BETWEEN :lo AND :hi AND t.task = 'c' || :client_id;
$(events instance.admitted "$P_ADM" "$ROWS" 2)
COMMIT;
BEGIN;
UPDATE attempts a SET state = 'DISPATCHED', worker_id = 'w' || :client_id,
	dispatched_at = now() WHERE a.instance_id BETWEEN :lo AND :hi
	AND a.number = 1 AND a.state = 'QUEUED';
COMMIT;
EOF
	result
} >"$DIR/today.sql"

lean() {
	plan
	cat <<EOF
BEGIN;
SELECT count(*) FROM (SELECT t.id FROM $ROWS ORDER BY t.id FOR UPDATE) l;
INSERT INTO attempts (run_id, instance_id, number, state, worker_id,
	due_at, admitted_at, dispatched_at)
	SELECT $(uuid 0), t.id, 1, 'DISPATCHED', 'w' || :client_id, now(),
	now(), now() FROM $ROWS ORDER BY t.id;
UPDATE task_instances t SET try_number = 1, state = 'READY',
	reason = NULL, ready_at = now(), updated_at = now()
	WHERE t.id BETWEEN :lo AND :hi AND t.task = 'c' || :client_id;
$(events instance.admitted "$P_ADM" "$ROWS" 2)
COMMIT;
EOF
	result
}
lean >"$DIR/lean.sql"
(SKIP=all && lean) >"$DIR/lean_noev.sql"
(SKIP=instance.running && lean) >"$DIR/lean_3ev.sql"
(SKIP="instance.running instance.admitted" && lean) >"$DIR/lean_2ev.sql"
(EVT=floor_event_log && lean) >"$DIR/lean_copy.sql"
(EVT=floor_event_log_4 && lean) >"$DIR/lean_4idx.sql"

# The copies of event_log, fresh, partitioned like it (a default
# partition), one with every index and one without the DAG and type ones.
case " $SHAPES " in
*" lean_copy "* | *" lean_4idx "*)
	for t in floor_event_log floor_event_log_4; do
		$PSQL_ERR -c "DROP TABLE IF EXISTS $t;
			CREATE TABLE $t (LIKE event_log INCLUDING ALL)
			PARTITION BY RANGE (time);
			CREATE TABLE ${t}_d PARTITION OF $t DEFAULT" >/dev/null
	done
	$PSQL_ERR -c "DROP INDEX floor_event_log_4_dag_id_id_idx,
		floor_event_log_4_type_id_idx" >/dev/null
	;;
esac

# The machine's busy jiffies (all CPUs) from /proc/stat.
busy() {
	awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat
}
HZ=$(getconf CLK_TCK)

r=1
while [ "$r" -le "$ROUNDS" ]; do
	for s in $SHAPES; do
		b0=$(busy)
		out=$("$BIN/pgbench" -h "$SOCK" -U ax -n -M prepared \
			-c "$CLIENTS" -j "$CLIENTS" -f "$DIR/$s.sql" \
			-T "$SECS" ax 2>&1) || {
			echo "$out" | tail -5 >&2
			exit 1
		}
		b1=$(busy)
		n=$(echo "$out" | awk '/actually processed/ {print $NF}' |
			cut -d/ -f1)
		tps=$(echo "$out" | awk '/^tps/ {print $3; exit}')
		echo "$tps $n $b0 $b1" | awk -v s="$s" -v r="$r" -v b="$B" \
			-v hz="$HZ" '{
			inst = $2 * b
			printf "round %d %-9s batch=%d instances_per_s=%.0f " \
			    "cpu_us_per_instance=%.1f\n", r, s, b, $1 * b,
			    (inst > 0 ? ($4 - $3) * 1e6 / hz / inst : 0) }'
		$PSQL -c "DELETE FROM task_instances WHERE dag_run_id = $RUN" \
			>/dev/null
	done
	r=$((r + 1))
done
