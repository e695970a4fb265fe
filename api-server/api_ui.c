/*
 * api_ui.c - serves the web UI's compiled-in assets (see api_ui.h).
 *
 * Cost: a binary search over a few tens of paths, then a response over
 * the static bytes (MHD_RESPMEM_PERSISTENT: no copy). No database, no
 * token: the assets are public, every datum they show comes from the
 * API, which checks the token on each call.
 */
#include "api_ui.h"

#include <microhttpd.h>
#include <string.h>

const ax_ui_asset *
ax_ui_asset_find(const char *path)
{
	size_t lo = 0, hi = ax_ui_assets_count;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int    c   = strcmp(path, ax_ui_assets[mid].path);
		if (c == 0)
			return &ax_ui_assets[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* 1 when the If-None-Match list inm holds etag (or is "*"). */
static int
etag_matches(const char *inm, const char *etag)
{
	size_t n = strlen(etag);

	if (inm == NULL)
		return 0;
	for (const char *p = inm; *p;) {
		while (*p == ' ' || *p == ',')
			p++;
		if (p[0] == 'W' && p[1] == '/')
			p += 2;
		if (*p == '*')
			return 1;
		if (strncmp(p, etag, n) == 0 &&
		    (p[n] == '\0' || p[n] == ',' || p[n] == ' '))
			return 1;
		while (*p && *p != ',')
			p++;
	}
	return 0;
}

static int
api_path(const char *path)
{
	return strcmp(path, "/api") == 0 || strncmp(path, "/api/", 5) == 0;
}

int
ax_api_ui_answer(const char *path, const char *if_none_match, ax_api_resp *r)
{
	const ax_ui_asset *a;
	int                hit;

	if (api_path(path))
		return 0;
	a = ax_ui_asset_find(path);
	if (a == NULL) {
		if (strncmp(path, "/assets/", 8) == 0)
			return 0;
		a = ax_ui_asset_find("/");
		if (a == NULL)
			return 0;
	}
	hit    = etag_matches(if_none_match, a->etag);
	r->raw = MHD_create_response_from_buffer(hit ? 0 : a->len,
	                                         hit ? NULL : (void *) a->data,
	                                         MHD_RESPMEM_PERSISTENT);
	if (r->raw == NULL) {
		ax_api_reply_error(r, 503, "unavailable",
		                   "out of memory for the answer");
		return 1;
	}
	MHD_add_response_header(r->raw, "ETag", a->etag);
	MHD_add_response_header(r->raw, "Cache-Control", "no-cache");
	MHD_add_response_header(r->raw, "Content-Security-Policy", AX_UI_CSP);
	MHD_add_response_header(r->raw, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(r->raw, "Referrer-Policy", "no-referrer");
	if (!hit)
		MHD_add_response_header(r->raw, "Content-Type",
		                        a->content_type);
	r->status = hit ? 304 : 200;
	return 1;
}
