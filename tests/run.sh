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
# Two tests at a time. Three made the suite faster alone (517 s against
# about 710 s), but not in CI, where the sanitizer build compiles beside
# it at idle priority and takes the CPU the tests leave (842 s against
# 806 s): the machine is busy either way.
meson test -C "$build" --print-errorlogs --num-processes 2 "${suites[@]}"
