/*
 * uuid.h - random (version 4) UUIDs for attempt run_ids and event ids.
 * Bytes come from getrandom(2); callable from any thread.
 */
#ifndef AX_UUID_H
#define AX_UUID_H

#define AX_UUID_LEN 37 /* 36 characters + NUL */

/* Writes a fresh lower-case UUID v4 into out and returns out. */
char *ax_uuid_v4(char out[AX_UUID_LEN]);

/*
 * Writes a fresh time-ordered UUID (version 7: 48 bits of Unix
 * milliseconds, then random bits) into out and returns out. Ids made
 * later sort later (to the millisecond), so the unique indexes over
 * event ids and attempt run_ids take new keys at their right edge
 * instead of at random pages: the cheap way to insert many rows a
 * second. Still unguessable enough for an idempotency key.
 */
char *ax_uuid_v7(char out[AX_UUID_LEN]);

/* 1 when s is a UUID in the canonical 8-4-4-4-12 hex form. */
int ax_uuid_valid(const char *s);

#endif /* AX_UUID_H */
