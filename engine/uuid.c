/*
 * uuid.c - UUID v4 and v7 from getrandom(2).
 */
#include "uuid.h"

#include <ctype.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/*
 * Random bytes come from a per-thread pool refilled with one getrandom(2)
 * call per POOL bytes: a system call per UUID was a measurable share of
 * axd's CPU at thousands of events a second (every event and attempt gets
 * one). A forked child empties its pool (pthread_atfork), so parent and
 * child never hand out the same bytes.
 */
#define POOL 512

static _Thread_local struct {
	uint8_t b[POOL];
	size_t  left; /* unused bytes, at the end of b */
} pool;

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void
pool_forget(void)
{
	pool.left = 0;
}

static void
pool_atfork(void)
{
	(void) pthread_atfork(NULL, NULL, pool_forget);
}

static void
fill_system(uint8_t *b, size_t n)
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

static void
fill_random(uint8_t *b, size_t n)
{
	(void) pthread_once(&atfork_once, pool_atfork);
	if (n > POOL) {
		fill_system(b, n);
		return;
	}
	if (pool.left < n) {
		fill_system(pool.b, POOL);
		pool.left = POOL;
	}
	uint8_t *src = pool.b + (POOL - pool.left);
	memcpy(b, src, n);
	memset(src, 0, n); /* used bytes do not stay in memory */
	pool.left -= n;
}

static char *
format(const uint8_t b[16], char out[AX_UUID_LEN])
{
	static const char hex[] = "0123456789abcdef";
	size_t            o     = 0;
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hex[b[i] >> 4];
		out[o++] = hex[b[i] & 15];
	}
	out[o] = '\0';
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
