#!/bin/sh
# tests/bench/ab.sh - A/B comparison of two builds with `axctl bench`.
#
#   tests/bench/ab.sh BUILD_A BUILD_B -- <axctl bench args>
#   ROUNDS=5 tests/bench/ab.sh build-base build -- --scenario throughput
#
# Runs the same `axctl bench ARGS --json` ROUNDS times (default 3) with
# each build's axctl (its axd and ax-worker: AX_BIN_DIR is the build
# directory), alternating: A then B in odd rounds, B then A in even ones,
# so a drift of the machine's speed during the run weighs on both alike.
# Then prints, for every numeric field of the JSON, the median, min and
# max per build and the ratio of the medians B/A (for latencies lower is
# better, for *_per_s higher is). A round whose bench failed is reported
# and left out of the figures. The JSON lines of every run are kept in
# $AB_OUT (default: a temp dir, printed) as a.jsonl and b.jsonl.
#
# Exit status: 0 when every run measured, 1 when some failed, 2 usage.
set -u

usage() {
	echo "usage: ROUNDS=N $0 BUILD_A BUILD_B -- <axctl bench args>" >&2
	echo "  BUILD_A, BUILD_B: build directories holding axctl, axd and" >&2
	echo "  ax-worker (e.g. build-base and build)" >&2
	exit 2
}

[ $# -ge 3 ] || usage
A=$1
B=$2
shift 2
[ "$1" = "--" ] || {
	echo "ab.sh: expected -- after the two builds, not '$1'" >&2
	usage
}
shift
for d in "$A" "$B"; do
	if [ ! -x "$d/axctl" ]; then
		echo "ab.sh: $d/axctl is missing or not executable;" \
		    "build it (meson compile -C $d) or name a build dir" >&2
		exit 2
	fi
done
ROUNDS=${ROUNDS:-3}
case $ROUNDS in
'' | *[!0-9]*)
	echo "ab.sh: ROUNDS must be a positive integer, not '$ROUNDS'" >&2
	exit 2
	;;
esac
[ "$ROUNDS" -ge 1 ] || {
	echo "ab.sh: ROUNDS must be at least 1" >&2
	exit 2
}
command -v python3 >/dev/null || {
	echo "ab.sh: python3 is needed for the statistics" >&2
	exit 2
}
A=$(cd "$A" && pwd)
B=$(cd "$B" && pwd)
OUT=${AB_OUT:-$(mktemp -d /tmp/ax-ab-XXXXXX)}
mkdir -p "$OUT" || exit 2
: >"$OUT/a.jsonl"
: >"$OUT/b.jsonl"
failed=0

# One run: build dir $1, output jsonl $2, label $3, then the bench args.
run_one() {
	dir=$1 out=$2 lab=$3
	shift 3
	echo "ab.sh: round $r/$ROUNDS, $lab: AX_BIN_DIR=$dir $dir/axctl bench" \
	    "$* --json" >&2
	line=$(AX_BIN_DIR="$dir" "$dir/axctl" bench "$@" --json \
	    2>"$OUT/last.err")
	rc=$?
	if [ $rc -ne 0 ] || [ -z "$line" ]; then
		echo "ab.sh: round $r, $lab failed (exit $rc); end of its" \
		    "stderr:" >&2
		tail -n 5 "$OUT/last.err" >&2
		failed=$((failed + 1))
		return
	fi
	echo "$line" >>"$out"
}

r=1
while [ "$r" -le "$ROUNDS" ]; do
	if [ $((r % 2)) -eq 1 ]; then
		run_one "$A" "$OUT/a.jsonl" A "$@"
		run_one "$B" "$OUT/b.jsonl" B "$@"
	else
		run_one "$B" "$OUT/b.jsonl" B "$@"
		run_one "$A" "$OUT/a.jsonl" A "$@"
	fi
	r=$((r + 1))
done

echo "ab.sh: A = $A, B = $B, $ROUNDS round(s) of: axctl bench $* --json"
echo "ab.sh: runs kept in $OUT (a.jsonl, b.jsonl)"
python3 - "$OUT/a.jsonl" "$OUT/b.jsonl" <<'PY'
import json, statistics, sys

def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    return rows

a, b = load(sys.argv[1]), load(sys.argv[2])
keys = []
for row in a + b:
    for k, v in row.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) \
                and k not in keys:
            keys.append(k)

def stats(rows, k):
    v = [r[k] for r in rows
         if isinstance(r.get(k), (int, float)) and not isinstance(r[k], bool)]
    if not v:
        return None
    return statistics.median(v), min(v), max(v), len(v)

def fmt(s):
    if s is None:
        return "%-38s" % "-"
    return "%-38s" % ("%.3f [%.3f..%.3f] n=%d" % s)

print("%-28s %s %s %s" % ("field", "%-38s" % "A median [min..max]",
                          "%-38s" % "B median [min..max]", "B/A"))
for k in keys:
    sa, sb = stats(a, k), stats(b, k)
    ratio = "-"
    if sa is not None and sb is not None and sa[0] != 0:
        ratio = "%.3f" % (sb[0] / sa[0])
    print("%-28s %s %s %s" % (k, fmt(sa), fmt(sb), ratio))
PY
[ $failed -eq 0 ] || {
	echo "ab.sh: $failed run(s) failed (left out above)" >&2
	exit 1
}
exit 0
