/*
 * suggest.h - "did you mean" for unknown names (config keys, YAML keys,
 * time zones, task names). Edit distance with a threshold that grows with
 * the word, so suggestions are close enough to be useful.
 */
#ifndef AX_SUGGEST_H
#define AX_SUGGEST_H

#include <stddef.h>

/* Levenshtein distance between a and b (case-sensitive), capped at 255. */
int ax_edit_distance(const char *a, const char *b);

/*
 * The candidate closest to word, or NULL when none is close enough
 * (distance <= 1 for words of up to 3 characters, else
 * max(2, strlen(word) / 3)). candidates holds n strings.
 */
const char *ax_suggest(const char *word, const char *const *candidates,
                       size_t n);

#endif /* AX_SUGGEST_H */
