/*
 * utf8.h - UTF-8 checks shared by every module that passes input text on
 * (logs, JSON, error details, the API's parameters).
 */
#ifndef AX_UTF8_H
#define AX_UTF8_H

#include <stddef.h>

/*
 * The length (1-4) of the valid UTF-8 sequence at s[0..n), or 0 when the
 * bytes there are not one (a stray continuation byte, an overlong form, a
 * surrogate, a code point past U+10FFFF, a sequence cut off at n).
 */
size_t ax_utf8_seq_len(const char *s, size_t n);

/* 1 when s[0..n) is valid UTF-8 throughout. */
int ax_utf8_valid(const char *s, size_t n);

/*
 * Copies the NUL-terminated src to dst (cap bytes, cap > 0) as valid,
 * printable UTF-8: invalid bytes and control characters other than tab
 * and newline become "\xNN", so text quoted from input can be logged and
 * put in JSON as is. Stops before a sequence that would not fit whole.
 * Returns the length written.
 */
size_t ax_utf8_sanitize(char *dst, size_t cap, const char *src);

#endif /* AX_UTF8_H */
