#!/usr/bin/env bash
# Installs what AX needs, builds it with -Werror and runs the whole test
# suite (unit, integration, e2e). This is the README's test command and
# what .ci/run runs. Usage: tests/run.sh [BUILD_DIR] (default build-test).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-test}
bash deploy/install-deps.sh # as root, or through sudo
if [ -d "$build" ]; then
	meson setup --reconfigure "$build" -Dwerror=true
else
	meson setup "$build" -Dwerror=true
fi
meson compile -C "$build"
meson test -C "$build" --print-errorlogs --num-processes 2
