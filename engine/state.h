/*
 * state.h - the task instance state machine of DESIGN.md section 3.
 *
 * Role: every component that moves a task instance asks this module first;
 * the database enforces the same table of moves in a BEFORE UPDATE trigger
 * on task_instances (function ax_ti_move_legal; the trigger's WHEN clause
 * is written from it by ax_ti_guard_install, engine/migrations/0021), so a
 * writer that bypasses the C layer is refused too.
 * Invariant: the two tables are identical; an integration test compares
 * them pair by pair. The state names are the strings stored in the
 * task_instances.state column.
 */
#ifndef AX_STATE_H
#define AX_STATE_H

#include "ax_err.h"

typedef enum ax_ti_state {
	AX_TI_PENDING = 0, /* created, waiting for time/upstreams/resources */
	AX_TI_READY,       /* admitted, handed to the queue service */
	AX_TI_RUNNING,     /* an attempt runs on a worker */
	AX_TI_SUCCESS,     /* terminal */
	AX_TI_FAILED,      /* terminal; may be retried (-> PENDING) */
	AX_TI_TIMEOUT,     /* terminal; may be retried (-> PENDING) */
	AX_TI_CANCELED,    /* terminal */
	AX_TI_SKIPPED,     /* terminal */
	AX_TI_UNKNOWN, /* worker lost; waits for a late report or a retry */
	AX_TI_STATE_COUNT_ /* number of states; not a state */
} ax_ti_state;

/* The stored name, e.g. "RUNNING"; "INVALID" for an out-of-range value. */
const char *ax_state_name(ax_ti_state s);

/*
 * Parses a stored name (exact, upper case) into *out. Returns AX_EINVAL
 * with a detail listing the valid names when name is unknown or NULL.
 */
ax_err ax_state_parse(const char *name, ax_ti_state *out);

/* Whether s is terminal (SUCCESS, FAILED, TIMEOUT, CANCELED, SKIPPED). */
int ax_state_terminal(ax_ti_state s);

/*
 * 1 when from -> to is a legal move, 0 otherwise. A "move" to the same
 * state is not a move and is not legal; out-of-range values are not legal.
 */
int ax_state_legal(ax_ti_state from, ax_ti_state to);

/*
 * AX_OK when legal, else AX_ESTATE with the detail "X -> Y is not a legal
 * move" and the moves that are legal from X.
 */
ax_err ax_state_check(ax_ti_state from, ax_ti_state to);

#endif /* AX_STATE_H */
