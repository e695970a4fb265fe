/*
 * uuid.c - UUID v4 from getrandom(2).
 */
#include "uuid.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static void
fill_random(uint8_t *b, size_t n)
{
	size_t off = 0;
	while (off < n) {
		ssize_t r = getrandom(b + off, n - off, 0);
		if (r <= 0)
			break;
		off += (size_t) r;
	}
	if (off < n) {
		/* getrandom cannot fail after boot; keep ids distinct anyway
		 */
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		for (; off < n; off++)
			b[off] = (uint8_t) (ts.tv_nsec >> (off % 4 * 8)) ^
			    (uint8_t) off;
	}
}

static char *
format(const uint8_t b[16], char out[AX_UUID_LEN])
{
	snprintf(out, AX_UUID_LEN,
	         "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
	         "%02x%02x%02x%02x%02x%02x",
	         b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
	         b[10], b[11], b[12], b[13], b[14], b[15]);
	return out;
}

char *
ax_uuid_v4(char out[AX_UUID_LEN])
{
	uint8_t b[16];

	fill_random(b, sizeof(b));
	b[6] = (uint8_t) ((b[6] & 0x0f) | 0x40);
	b[8] = (uint8_t) ((b[8] & 0x3f) | 0x80);
	return format(b, out);
}

char *
ax_uuid_v7(char out[AX_UUID_LEN])
{
	struct timespec ts;
	uint64_t        ms;
	uint8_t         b[16];

	clock_gettime(CLOCK_REALTIME, &ts);
	ms = (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
	fill_random(b + 6, sizeof(b) - 6);
	for (int i = 0; i < 6; i++)
		b[i] = (uint8_t) (ms >> (40 - 8 * i));
	b[6] = (uint8_t) ((b[6] & 0x0f) | 0x70);
	b[8] = (uint8_t) ((b[8] & 0x3f) | 0x80);
	return format(b, out);
}

int
ax_uuid_valid(const char *s)
{
	if (s == NULL || strlen(s) != 36)
		return 0;
	for (int i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return 0;
		} else if (!isxdigit((unsigned char) s[i])) {
			return 0;
		}
	}
	return 1;
}
