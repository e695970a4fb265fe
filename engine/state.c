/*
 * state.c - the table of legal task instance moves (DESIGN.md 3).
 *
 * The table is a constant bitmask per source state: lookups are one load
 * and one AND, cheap enough for the result handler's hot path. The same
 * moves are written in SQL (ax_ti_move_legal, last in
 * 0017_preempted_requeue.sql); change both together, then call
 * ax_ti_guard_install() in the same migration so the trigger's WHEN
 * clause is written out again (0021). The integration test compares
 * them.
 */
#include "state.h"

#include <stdio.h>
#include <string.h>

#define BIT(s) (1u << (s))

static const char *const state_names[AX_TI_STATE_COUNT_] = {
	[AX_TI_PENDING] = "PENDING",   [AX_TI_READY] = "READY",
	[AX_TI_RUNNING] = "RUNNING",   [AX_TI_SUCCESS] = "SUCCESS",
	[AX_TI_FAILED] = "FAILED",     [AX_TI_TIMEOUT] = "TIMEOUT",
	[AX_TI_CANCELED] = "CANCELED", [AX_TI_SKIPPED] = "SKIPPED",
	[AX_TI_UNKNOWN] = "UNKNOWN",
};

/*
 * PENDING -> READY -> RUNNING -> SUCCESS | FAILED | TIMEOUT
 * PENDING|READY|RUNNING -> CANCELED ; PENDING -> SKIPPED
 * RUNNING -> UNKNOWN -> READY | SUCCESS | FAILED
 * RUNNING -> PENDING (preempted: ready again after a delay)
 * FAILED|TIMEOUT -> PENDING (retry) ; terminal -> PENDING (clear)
 */
static const unsigned legal_moves[AX_TI_STATE_COUNT_] = {
	[AX_TI_PENDING] =
	    BIT(AX_TI_READY) | BIT(AX_TI_CANCELED) | BIT(AX_TI_SKIPPED),
	[AX_TI_READY]   = BIT(AX_TI_RUNNING) | BIT(AX_TI_CANCELED),
	[AX_TI_RUNNING] = BIT(AX_TI_SUCCESS) | BIT(AX_TI_FAILED) |
	    BIT(AX_TI_TIMEOUT) | BIT(AX_TI_CANCELED) | BIT(AX_TI_UNKNOWN) |
	    BIT(AX_TI_PENDING),
	[AX_TI_SUCCESS]  = BIT(AX_TI_PENDING),
	[AX_TI_FAILED]   = BIT(AX_TI_PENDING),
	[AX_TI_TIMEOUT]  = BIT(AX_TI_PENDING),
	[AX_TI_CANCELED] = BIT(AX_TI_PENDING),
	[AX_TI_SKIPPED]  = BIT(AX_TI_PENDING),
	[AX_TI_UNKNOWN] =
	    BIT(AX_TI_READY) | BIT(AX_TI_SUCCESS) | BIT(AX_TI_FAILED),
};

static int
state_valid(ax_ti_state s)
{
	return (unsigned) s < AX_TI_STATE_COUNT_;
}

const char *
ax_state_name(ax_ti_state s)
{
	return state_valid(s) ? state_names[s] : "INVALID";
}

ax_err
ax_state_parse(const char *name, ax_ti_state *out)
{
	for (int i = 0; name != NULL && i < AX_TI_STATE_COUNT_; i++) {
		if (strcmp(name, state_names[i]) == 0) {
			*out = (ax_ti_state) i;
			return AX_OK;
		}
	}
	return ax_err_set(
	    AX_EINVAL,
	    "unknown task instance state '%s'; expected one of PENDING, "
	    "READY, RUNNING, SUCCESS, FAILED, TIMEOUT, CANCELED, SKIPPED, "
	    "UNKNOWN",
	    name != NULL ? name : "(null)");
}

int
ax_state_terminal(ax_ti_state s)
{
	switch (s) {
	case AX_TI_SUCCESS:
	case AX_TI_FAILED:
	case AX_TI_TIMEOUT:
	case AX_TI_CANCELED:
	case AX_TI_SKIPPED:
		return 1;
	default:
		return 0;
	}
}

int
ax_state_legal(ax_ti_state from, ax_ti_state to)
{
	if (!state_valid(from) || !state_valid(to))
		return 0;
	return (legal_moves[from] & BIT(to)) != 0;
}

ax_err
ax_state_check(ax_ti_state from, ax_ti_state to)
{
	char   allowed[128] = "";
	size_t len          = 0;

	if (ax_state_legal(from, to))
		return AX_OK;
	for (int i = 0; state_valid(from) && i < AX_TI_STATE_COUNT_; i++) {
		if ((legal_moves[from] & BIT(i)) == 0)
			continue;
		int n = snprintf(allowed + len, sizeof(allowed) - len, "%s%s",
		                 len > 0 ? ", " : "", state_names[i]);
		if (n < 0 || (size_t) n >= sizeof(allowed) - len)
			break;
		len += (size_t) n;
	}
	return ax_err_set(AX_ESTATE,
	                  "%s -> %s is not a legal move (legal from %s: %s)",
	                  ax_state_name(from), ax_state_name(to),
	                  ax_state_name(from), len > 0 ? allowed : "none");
}
