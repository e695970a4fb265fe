#!/usr/bin/env bash
# Installs every Debian 12 package AX needs to build, test and run.
# Idempotent: packages already present are skipped by apt-get. Run as root.
set -euo pipefail

PKGS=(
	# build
	build-essential meson ninja-build pkg-config cmake
	clang clang-format libclang-rt-dev
	protobuf-c-compiler libprotobuf-c-dev
	libnng-dev
	libpq-dev libyaml-dev
	libmicrohttpd-dev libjansson-dev libcurl4-openssl-dev
	uuid-dev
	zlib1g-dev # history archive files (engine/history.c)
	# tests
	libcriterion-dev
	git # .ci/run: the format check lists the tracked files
	python3-jsonschema # test_sinks validates OpenLineage events
	prometheus # promtool: test_api checks /metrics with it
	openssl # test_api_e2e makes a self-signed TLS certificate
	patroni etcd-server python3-etcd # the ha suite: AX on a Patroni cluster (tests/ha)
	chromium nodejs # the browser suite: the web UI in headless chromium (tests/browser)
	prometheus-alertmanager # test_alerts: alerts through a real Alertmanager, amtool checks deploy/alertmanager/
	# runtime: embedded PostgreSQL, time zone data
	postgresql postgresql-contrib tzdata procps
)

# apt-get needs root: as another user, go through sudo (a fresh Debian
# run as root may have no sudo at all, so the README does not call it).
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		exec sudo bash "$0" "$@"
	fi
	echo "install-deps.sh: must run as root, and sudo is not installed" >&2
	exit 1
fi

# The user ax-worker runs tasks as when it is started as root
# (worker.run_as): a system account without a password or login shell,
# with a home of its own. Made once; an existing user is left alone.
task_user() {
	if ! getent passwd ax-task >/dev/null; then
		useradd --system --home-dir /var/lib/ax-task --create-home \
			--shell /usr/sbin/nologin ax-task
		echo "install-deps.sh: created system user ax-task (tasks run as it)"
	fi
}
task_user

# The browser suite's node packages (tests/browser/package-lock.json:
# puppeteer-core, pinned), installed with `npm ci` into
# tests/browser/node_modules; again only when the lock file changed.
browser_deps() {
	local dir lock stamp
	dir="$(cd "$(dirname "$0")/.." && pwd)/tests/browser"
	lock="$dir/package-lock.json"
	stamp="$dir/node_modules/.ax-lock-sha256"
	[ -f "$lock" ] || return 0
	if ! command -v npm >/dev/null 2>&1; then
		# Debian's nodejs comes without npm; other nodejs builds bring it
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm
	fi
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(sha256sum "$lock" | cut -d' ' -f1)" ]; then
		return 0
	fi
	(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
	sha256sum "$lock" | cut -d' ' -f1 >"$stamp"
	echo "install-deps.sh: installed the browser tests' node packages (tests/browser)"
}

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps.sh: all ${#PKGS[@]} packages present"
	browser_deps
	exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
# Debian starts a default cluster on install; AX runs its own clusters.
if command -v pg_ctlcluster >/dev/null 2>&1 && [ -z "${AX_KEEP_SYSTEM_PG:-}" ]; then
	pg_lsclusters -h 2>/dev/null | while read -r ver name _; do
		pg_ctlcluster "$ver" "$name" stop 2>/dev/null || true
	done
fi
echo "install-deps.sh: installed ${missing[*]}"
browser_deps
