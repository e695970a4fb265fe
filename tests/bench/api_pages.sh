#!/usr/bin/env bash
# api_pages.sh - latency of ax-api's list pages and /metrics over real HTTP
# against a running ax-api (e.g. on a database holding a large history).
#
# Usage: tests/bench/api_pages.sh BASE_URL TOKEN [N] [PATH...]
#   BASE_URL  e.g. http://127.0.0.1:8080
#   TOKEN     a viewer token (axctl token create --role viewer)
#   N         requests per page (default 200), one keep-alive connection
#   PATH      pages to time (default: the set below)
# Prints one line per page: requests, HTTP status, P50, P99 and max in ms
# (curl's time_total per request). Asserts nothing.
#
# The default set is the list pages with each of their filters, first
# pages and a deep keyset page (cursor), and /metrics. DAG names, ids and
# cursors follow the history that tests/bench/api_pages_gen.sql builds
# (100,000 DAGs, 1,000,000 runs, 10,000,000 instances and attempts,
# 10,000,000 events); pass PATHs for another database.
set -euo pipefail

base=${1:?usage: api_pages.sh BASE_URL TOKEN [N] [PATH...]}
token=${2:?usage: api_pages.sh BASE_URL TOKEN [N] [PATH...]}
n=${3:-200}
shift 3 2>/dev/null || shift $#

pages=("$@")
if [ ${#pages[@]} -eq 0 ]; then
	pages=(
		"/api/v1/dags?limit=100"
		"/api/v1/dags?limit=100&cursor=dag_050000"
		"/api/v1/runs?limit=100"
		"/api/v1/runs?limit=100&dag=dag_012345"
		"/api/v1/runs?limit=100&state=FAILED"
		"/api/v1/runs?limit=100&state=RUNNING"
		"/api/v1/runs?limit=100&cursor=500000"
		"/api/v1/instances?limit=100"
		"/api/v1/instances?limit=100&dag=dag_012345"
		"/api/v1/instances?limit=100&state=FAILED"
		"/api/v1/instances?limit=100&state=RUNNING"
		"/api/v1/instances?limit=100&run=500000"
		"/api/v1/instances?limit=100&task=t3"
		"/api/v1/instances?limit=100&cursor=5000000"
		"/api/v1/events?limit=100"
		"/api/v1/events?limit=100&dag=dag_012345"
		"/api/v1/events?limit=100&type=instance.failed"
		"/api/v1/events?limit=100&run=500000"
		"/api/v1/events?limit=100&instance=5000000"
		"/api/v1/events?limit=100&since=2026-11-01T00:00:00Z"
		"/api/v1/events?limit=100&cursor=5000000"
		"/api/v1/metrics"
	)
fi

for p in "${pages[@]}"; do
	urls=()
	for ((i = 0; i < n; i++)); do
		urls+=(-o /dev/null "$base$p")
	done
	# one curl, one keep-alive connection, a time per request
	out=$(curl -s -H "Authorization: Bearer $token" \
		-w '%{http_code} %{time_total}\n' "${urls[@]}")
	code=$(printf '%s\n' "$out" | awk '{ print $1 }' | sort -u | tr '\n' ' ')
	printf '%s\n' "$out" | awk '{ printf "%.3f\n", $2 * 1000 }' | sort -n |
		awk -v page="$p" -v code="$code" '
			{ t[NR] = $1 }
			END {
				p50 = t[int((NR - 1) * 0.50) + 1]
				p99 = t[int((NR - 1) * 0.99) + 1]
				printf "%-52s n=%d status=%sp50=%.1fms p99=%.1fms max=%.1fms\n",
					page, NR, code, p50, p99, t[NR]
			}'
done
