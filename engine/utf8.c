/*
 * utf8.c - UTF-8 checks (see utf8.h).
 */
#include "utf8.h"

#include <stdio.h>
#include <string.h>

size_t
ax_utf8_seq_len(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *) str;

	if (n == 0)
		return 0;
	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xC2 && s[0] <= 0xDF)
		return n >= 2 && (s[1] & 0xC0) == 0x80 ? 2 : 0;
	if (s[0] >= 0xE0 && s[0] <= 0xEF) {
		if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80)
			return 0;
		if (s[0] == 0xE0 && s[1] < 0xA0) /* overlong */
			return 0;
		if (s[0] == 0xED && s[1] >= 0xA0) /* a surrogate */
			return 0;
		return 3;
	}
	if (s[0] >= 0xF0 && s[0] <= 0xF4) {
		if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 ||
		    (s[3] & 0xC0) != 0x80)
			return 0;
		if (s[0] == 0xF0 && s[1] < 0x90) /* overlong */
			return 0;
		if (s[0] == 0xF4 && s[1] >= 0x90) /* past U+10FFFF */
			return 0;
		return 4;
	}
	return 0;
}

int
ax_utf8_valid(const char *s, size_t n)
{
	size_t i = 0, k;

	while (i < n) {
		if ((k = ax_utf8_seq_len(s + i, n - i)) == 0)
			return 0;
		i += k;
	}
	return 1;
}

size_t
ax_utf8_sanitize(char *dst, size_t cap, const char *src)
{
	size_t len = 0, n = strlen(src), i = 0, k;

	while (i < n) {
		unsigned char c = (unsigned char) src[i];
		k               = ax_utf8_seq_len(src + i, n - i);
		if (k == 0 || (c < 0x20 && c != '\t' && c != '\n') ||
		    c == 0x7F) {
			if (len + 4 >= cap)
				break;
			snprintf(dst + len, cap - len, "\\x%02X", c);
			len += 4;
			i++;
			continue;
		}
		if (len + k >= cap)
			break;
		memcpy(dst + len, src + i, k);
		len += k;
		i += k;
	}
	dst[len] = '\0';
	return len;
}
