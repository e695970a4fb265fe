# tests/bench/floor_args.sh - the arguments edge_floor.sh and
# throughput_floor.sh share, checked before anything runs. Sourced:
#
#   . "$(dirname "$0")/floor_args.sh"
#   floor_args "[BATCH]" 20 2 "$@"   # extra usage, default SECONDS, ROUNDS
#
# Sets SOCK (the socket directory, required), SECS and ROUNDS (positive
# integers) and BIN (the newest PostgreSQL's bin directory, for pgbench);
# the caller makes its temp directory after its own checks. A missing
# socket directory or a count that is not a positive integer exits 2
# with the usage.

# floor_count NAME VALUE: exits 2 unless VALUE is a positive integer.
floor_count() {
	case $2 in
	'' | *[!0-9]* | 0 | 0*)
		echo "$0: $1 must be a positive integer, not '$2'" >&2
		echo "usage: $0 SOCKET_DIR [SECONDS] [ROUNDS]${FLOOR_USAGE:+ $FLOOR_USAGE}" >&2
		exit 2
		;;
	esac
}

floor_args() {
	FLOOR_USAGE=$1
	SECS=$2
	ROUNDS=$3
	shift 3
	[ $# -ge 1 ] || {
		echo "usage: $0 SOCKET_DIR [SECONDS] [ROUNDS]${FLOOR_USAGE:+ $FLOOR_USAGE}" >&2
		exit 2
	}
	SOCK=$1
	SECS=${2:-$SECS}
	ROUNDS=${3:-$ROUNDS}
	floor_count SECONDS "$SECS"
	floor_count ROUNDS "$ROUNDS"
	BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
	[ -x "$BIN/pgbench" ] || {
		echo "$0: no pgbench under /usr/lib/postgresql (install" \
		    "postgresql: deploy/install-deps.sh)" >&2
		exit 2
	}
}
