/*
 * suggest.c - edit distance and closest-candidate lookup.
 */
#include "suggest.h"

#include <string.h>

int
ax_edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	int    row[256];

	if (la > 254 || lb > 254)
		return 255;
	for (size_t j = 0; j <= lb; j++)
		row[j] = (int) j;
	for (size_t i = 1; i <= la; i++) {
		int diag = row[0];
		row[0]   = (int) i;
		for (size_t j = 1; j <= lb; j++) {
			int up   = row[j];
			int cost = a[i - 1] == b[j - 1] ? 0 : 1;
			int best = diag + cost;
			if (row[j] + 1 < best)
				best = row[j] + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag   = up;
		}
	}
	return row[lb] > 255 ? 255 : row[lb];
}

const char *
ax_suggest(const char *word, const char *const *candidates, size_t n)
{
	const char *best      = NULL;
	int         best_d    = 256;
	size_t      len       = strlen(word);
	int         threshold = len <= 3 ? 1 : (int) (len / 3);

	if (len > 3 && threshold < 2)
		threshold = 2;
	for (size_t i = 0; i < n; i++) {
		int d = ax_edit_distance(word, candidates[i]);
		if (d < best_d) {
			best_d = d;
			best   = candidates[i];
		}
	}
	return best_d <= threshold ? best : NULL;
}
