#!/usr/bin/env bash
# Installs what AX needs, builds it with -Werror and runs the test suites.
# This is the README's test command and what .ci/run runs.
# Usage: tests/run.sh [--suite NAME]... [BUILD_DIR] (default build-test).
# Without --suite: every suite but `ha` (unit, integration, e2e,
# browser: the web UI in headless chromium); the
# test setup `default` in tests/meson.build leaves `ha` out. With --suite
# NAME (repeatable): only those suites, e.g. `--suite ha`, AX on a Patroni
# cluster for about 3 minutes (see docs/operations.md), which .ci/run runs
# after the default suites.
set -euo pipefail
cd "$(dirname "$0")/.."
suites=()
while [ $# -gt 0 ]; do
	case "$1" in
	--suite)
		[ $# -ge 2 ] || { echo "tests/run.sh: --suite needs a suite name (unit, integration, e2e, browser, ha)" >&2; exit 2; }
		suites+=(--suite "$2")
		shift 2
		;;
	--suite=*)
		suites+=(--suite "${1#--suite=}")
		shift
		;;
	-*)
		echo "tests/run.sh: unknown option $1 (usage: tests/run.sh [--suite NAME]... [BUILD_DIR])" >&2
		exit 2
		;;
	*)
		break
		;;
	esac
done
build=${1:-build-test}
bash deploy/install-deps.sh # as root, or through sudo
if [ -d "$build" ]; then
	meson setup --reconfigure "$build" -Dwerror=true
else
	meson setup "$build" -Dwerror=true
fi
meson compile -C "$build"
# Three tests at a time on two cores: most of a test's time is waiting
# (timers, processes, PostgreSQL). Two were faster in CI while each test
# cluster cost 0.6 s of CPU (842 s with three against 806 s with two,
# the sanitizer build compiling beside at idle priority); with clusters
# copied from a migrated template (0.25 s) three are faster: CI's stage
# took 653 s against 799 s, every test passing (CI 1,291 s in all).
meson test -C "$build" --print-errorlogs --num-processes 3 "${suites[@]}"
