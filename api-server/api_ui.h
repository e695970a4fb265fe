/*
 * api_ui.h - the web UI's static assets, compiled into ax-api, and the
 * answer that serves them on the API's port.
 *
 * Role: api_server.c asks ax_api_ui_answer() for every GET or HEAD whose
 * path no API route knows. The assets are the files of api-server/ui/,
 * turned into byte arrays at build time by api-server/ui/gen_ui_assets.py
 * (nothing to install beside the binary, no network at run time).
 *
 * URL space: "/assets/<file>" is one asset (unknown: 404); "/api" and
 * everything under "/api/" belong to the API and keep its JSON 404s;
 * any other path is a client route of the single-page UI and gets
 * index.html, whose script reads location.pathname.
 *
 * Every asset answer carries Content-Type, an ETag (a hash of the bytes:
 * If-None-Match gets a 304 without a body), Cache-Control: no-cache (the
 * browser revalidates, so a new ax-api never runs with old scripts), a
 * strict Content-Security-Policy (only this origin's scripts, styles,
 * images and fetches; no inline script, no frames), nosniff and
 * no-referrer.
 */
#ifndef AX_API_UI_H
#define AX_API_UI_H

#include <stddef.h>

#include "api_http.h"

typedef struct ax_ui_asset {
	const char          *path;         /* "/" or "/assets/<file>" */
	const char          *content_type; /* with charset for text */
	const unsigned char *data;         /* static, NUL after len bytes */
	size_t               len;
	const char          *etag; /* quoted, as sent */
} ax_ui_asset;

/* The generated table (ax_ui_assets_gen.c), sorted by path. */
extern const ax_ui_asset ax_ui_assets[];
extern const size_t      ax_ui_assets_count;

/* The Content-Security-Policy of every UI answer. */
#define AX_UI_CSP                                                             \
	"default-src 'self'; script-src 'self'; style-src 'self'; "           \
	"img-src 'self' data:; connect-src 'self'; object-src 'none'; "       \
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

/* The asset served at path, or NULL (no index.html fallback). */
const ax_ui_asset *ax_ui_asset_find(const char *path);

/*
 * For a GET or HEAD of path that matched no API route: fills r with the
 * asset (200, or 304 when if_none_match, which may be NULL, names its
 * ETag) or index.html for a client route, and returns 1. Returns 0 when
 * path belongs to the API or is an unknown "/assets/" file: the caller
 * answers its JSON 404. Thread-safe (reads only static data).
 */
int ax_api_ui_answer(const char *path, const char *if_none_match,
                     ax_api_resp *r);

#endif /* AX_API_UI_H */
