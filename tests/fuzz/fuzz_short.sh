#!/bin/sh
# fuzz_short.sh SECONDS BUILDDIR NAME=SEEDS... - runs each fuzz target
# for SECONDS, two at a time (libFuzzer takes one core; CI has two).
# New inputs go to BUILDDIR/NAME_corpus, never to the seeds; the whole
# output goes to BUILDDIR/NAME.log and is shown when a target fails; the
# summary lines say how many executions ran and how fast. Exits non-zero
# when any target found a crash, a leak or a timeout.
set -eu
secs=$1
dir=$2
shift 2
one() {
	name=${1%%=*}
	seeds=${1#*=}
	log="$dir/$name.log"
	mkdir -p "$dir/${name}_corpus"
	if ! "$dir/$name" -max_total_time="$secs" -timeout=5 \
		-rss_limit_mb=1024 -print_final_stats=1 \
		-artifact_prefix="$dir/" "$dir/${name}_corpus" "$seeds" \
		>"$log" 2>&1; then
		tail -n 80 "$log"
		echo "fuzz: $name failed (its log: $log)" >&2
		return 1
	fi
	grep -E "^(Done|stat::average_exec_per_sec)" "$log" | sed "s/^/$name: /"
}
rc=0
pids=""
for t in "$@"; do
	one "$t" &
	pids="$pids $!"
	set -- $pids
	if [ $# -ge 2 ]; then
		wait "$1" || rc=1
		shift
		pids="$*"
	fi
done
for p in $pids; do
	wait "$p" || rc=1
done
exit $rc
