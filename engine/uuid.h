/*
 * uuid.h - random (version 4) UUIDs for attempt run_ids and event ids.
 * Bytes come from getrandom(2); callable from any thread.
 */
#ifndef AX_UUID_H
#define AX_UUID_H

#define AX_UUID_LEN 37 /* 36 characters + NUL */

/* Writes a fresh lower-case UUID v4 into out and returns out. */
char *ax_uuid_v4(char out[AX_UUID_LEN]);

/* 1 when s is a UUID in the canonical 8-4-4-4-12 hex form. */
int ax_uuid_valid(const char *s);

#endif /* AX_UUID_H */
