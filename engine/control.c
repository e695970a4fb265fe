/*
 * control.c - sends control payloads to axd (see control.h). The receiving
 * side, decoding and routing, is actors/control.c.
 */
#include "control.h"

#include <string.h>

ax_err
ax_control_notify(ax_store *s, const char *json)
{
	const char *params[1] = { json };
	size_t      n;

	if (s == NULL || json == NULL || json[0] == '\0')
		return ax_err_set(AX_EINVAL, "control payload is empty");
	n = strlen(json);
	if (n > AX_CONTROL_PAYLOAD_MAX)
		return ax_err_set(AX_EINVAL,
		                  "control payload is %zu bytes; PostgreSQL "
		                  "allows at most %d",
		                  n, AX_CONTROL_PAYLOAD_MAX);
	return ax_store_exec(
	    s, "SELECT pg_notify('" AX_CONTROL_CHANNEL "', $1)", 1, params);
}
