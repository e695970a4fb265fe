/*
 * api_client.c - axctl's HTTP client of ax-api (see api_client.h).
 *
 * One libcurl easy handle per request: axctl makes a few requests per
 * run, so handle reuse would save nothing measurable. Answers are read
 * into memory (ax-api pages its lists, so they stay small) except
 * streamed log follows, which go straight to the caller's FILE.
 */
#include "api_client.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define CONNECT_TIMEOUT_S 10L
#define REQUEST_TIMEOUT_S 120L /* whole non-streaming request */

struct ax_api_client {
	char *url;        /* base URL, no trailing slash */
	char *token;      /* bearer token, NULL when none was found */
	char *token_from; /* where the token came from, for the 401 hint */
	char *idem;       /* Idempotency-Key of POSTs; NULL: none */
	const volatile sig_atomic_t *abort; /* ends requests; NULL: none */
};

/* ---- options ------------------------------------------------------------ */

/* Matches --name VALUE or --name=VALUE at argv[*i]; 1 matched, 0 not,
 * -1 missing value. */
static int
opt_value(int argc, char **argv, int *i, const char *name, const char **val,
          const char *prog)
{
	const char *a = argv[*i];
	size_t      n = strlen(name);

	if (strncmp(a, name, n) != 0)
		return 0;
	if (a[n] == '=') {
		*val = a + n + 1;
		(*i)++;
		return 1;
	}
	if (a[n] != '\0')
		return 0;
	if (*i + 1 >= argc) {
		fprintf(stderr, "%s: %s needs a value\n", prog, name);
		return -1;
	}
	*val = argv[*i + 1];
	*i += 2;
	return 1;
}

int
ax_api_opts_parse(int argc, char **argv, int *i, ax_api_opts *o,
                  const char *prog)
{
	int r;

	if (strcmp(argv[*i], "--json") == 0) {
		o->json = 1;
		(*i)++;
		return 1;
	}
	if ((r = opt_value(argc, argv, i, "--server", &o->server, prog)) != 0)
		return r;
	return opt_value(argc, argv, i, "--token-file", &o->token_file, prog);
}

/* ---- client ------------------------------------------------------------- */

/* Reads the first line of path into *out (trimmed, malloc'd). */
static ax_err
read_token(const char *path, char **out)
{
	FILE  *f = fopen(path, "r");
	char   line[512];
	size_t n;

	*out = NULL;
	if (f == NULL)
		return ax_err_set(AX_EIO, "cannot read token file %s: %s",
		                  path, strerror(errno));
	if (fgets(line, sizeof(line), f) == NULL)
		line[0] = '\0';
	fclose(f);
	n = strlen(line);
	while (n > 0 &&
	       (line[n - 1] == '\n' || line[n - 1] == '\r' ||
	        line[n - 1] == ' ' || line[n - 1] == '\t'))
		line[--n] = '\0';
	if (n == 0)
		return ax_err_set(AX_EINVAL, "token file %s is empty", path);
	if ((*out = strdup(line)) == NULL)
		return ax_err_set(AX_ENOMEM, "token");
	return AX_OK;
}

/* Token precedence: an explicit --token-file, then AX_TOKEN, then the
 * standalone admin token when it exists (absent: no token, and a 401
 * says how to give one). */
static ax_err
find_token(ax_api_client *c, const ax_api_opts *o)
{
	const char *env = getenv("AX_TOKEN");
	const char *home;
	char        path[4096];
	ax_err      rv;

	if (o != NULL && o->token_file != NULL) {
		if ((rv = read_token(o->token_file, &c->token)) != AX_OK)
			return rv;
		c->token_from = strdup(o->token_file);
		return AX_OK;
	}
	if (env != NULL && *env != '\0') {
		c->token      = strdup(env);
		c->token_from = strdup("$AX_TOKEN");
		return c->token ? AX_OK : ax_err_set(AX_ENOMEM, "token");
	}
	home = getenv("AX_HOME");
	snprintf(path, sizeof(path), "%s/admin.token",
	         home && *home ? home : "./.ax");
	if (read_token(path, &c->token) == AX_OK)
		c->token_from = strdup(path);
	return AX_OK;
}

ax_err
ax_api_client_new(const ax_api_opts *o, ax_api_client **out)
{
	ax_api_client *c   = calloc(1, sizeof(*c));
	const char    *url = o ? o->server : NULL;
	ax_err         rv;
	size_t         n;

	*out = NULL;
	if (c == NULL)
		return ax_err_set(AX_ENOMEM, "api client");
	if (url == NULL || *url == '\0')
		url = getenv("AX_SERVER");
	if (url == NULL || *url == '\0')
		url = AX_API_DEFAULT_SERVER;
	if (strncmp(url, "http://", 7) != 0 &&
	    strncmp(url, "https://", 8) != 0) {
		free(c);
		return ax_err_set(AX_EINVAL,
		                  "server URL '%s' must start with http:// or "
		                  "https://",
		                  url);
	}
	if ((c->url = strdup(url)) == NULL) {
		free(c);
		return ax_err_set(AX_ENOMEM, "api client");
	}
	n = strlen(c->url);
	while (n > 0 && c->url[n - 1] == '/')
		c->url[--n] = '\0';
	if ((rv = find_token(c, o)) != AX_OK) {
		ax_api_client_free(c);
		return rv;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	*out = c;
	return AX_OK;
}

void
ax_api_client_free(ax_api_client *c)
{
	if (c == NULL)
		return;
	free(c->url);
	free(c->token);
	free(c->token_from);
	free(c->idem);
	free(c);
}

ax_err
ax_api_client_set_idempotency_key(ax_api_client *c, const char *key)
{
	char *k = NULL;

	if (key != NULL) {
		size_t n = strlen(key);
		if (n == 0 || n > 255)
			return ax_err_set(AX_EINVAL,
			                  "an idempotency key is 1 to 255 "
			                  "printable ASCII characters");
		for (size_t i = 0; i < n; i++)
			if (key[i] < 0x21 || key[i] > 0x7e)
				return ax_err_set(
				    AX_EINVAL,
				    "an idempotency key is printable "
				    "ASCII without spaces, got '%s'",
				    key);
		if ((k = strdup(key)) == NULL)
			return ax_err_set(AX_ENOMEM, "idempotency key");
	}
	free(c->idem);
	c->idem = k;
	return AX_OK;
}

void
ax_api_client_set_abort(ax_api_client *c, const volatile sig_atomic_t *flag)
{
	c->abort = flag;
}

const char *
ax_api_client_url(const ax_api_client *c)
{
	return c->url;
}

void
ax_api_reply_fini(ax_api_reply *rep)
{
	free(rep->body);
	json_decref(rep->json);
	memset(rep, 0, sizeof(*rep));
}

/* ---- requests ----------------------------------------------------------- */

typedef struct sink {
	CURL                        *h;
	ax_api_reply                *rep;
	FILE                        *out; /* stream 2xx bodies here */
	int                          oom;
	const volatile sig_atomic_t *abort;
} sink;

/* curl calls it at least once a second while a request is in flight: a
 * nonzero return ends the request (CURLE_ABORTED_BY_CALLBACK). */
static int
on_progress(void *u, curl_off_t dt, curl_off_t dn, curl_off_t ut,
            curl_off_t un)
{
	const sink *s = u;
	(void) dt, (void) dn, (void) ut, (void) un;
	return *s->abort != 0;
}

static size_t
on_body(char *p, size_t sz, size_t nm, void *u)
{
	sink  *s    = u;
	size_t n    = sz * nm;
	long   code = 0;

	if (s->out != NULL) {
		curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &code);
		if (code >= 200 && code < 300) {
			if (fwrite(p, 1, n, s->out) != n)
				return 0;
			fflush(s->out);
			return n;
		}
	}
	char *nb = realloc(s->rep->body, s->rep->len + n + 1);
	if (nb == NULL) {
		s->oom = 1;
		return 0;
	}
	memcpy(nb + s->rep->len, p, n);
	s->rep->body = nb;
	s->rep->len += n;
	nb[s->rep->len] = '\0';
	return n;
}

static ax_err
status_err(long status)
{
	if (status == 401 || status == 403)
		return AX_EPERM;
	if (status == 404)
		return AX_ENOENT;
	if (status == 409)
		return AX_ESTATE;
	if (status >= 400 && status < 500)
		return AX_EINVAL;
	return AX_EDB;
}

/* Turns an HTTP error answer into the user's message. */
static ax_err
http_error(ax_api_client *c, ax_api_reply *rep)
{
	const char *code =
	    json_string_value(json_object_get(rep->json, "error"));
	const char *detail =
	    json_string_value(json_object_get(rep->json, "detail"));
	ax_err e = status_err(rep->status);

	if (code == NULL) {
		char first[200] = "";
		if (rep->body != NULL)
			snprintf(first, sizeof(first), "%.*s",
			         (int) strcspn(rep->body, "\r\n"), rep->body);
		return ax_err_set(e, "HTTP %ld from %s%s%s", rep->status,
		                  c->url, *first ? ": " : "", first);
	}
	if (rep->status == 401)
		return ax_err_set(
		    e, "%s: %s%s%s%s", code, detail ? detail : "",
		    c->token ? " (token from "
		             : "; no token: set "
		               "AX_TOKEN or use "
		               "--token-file",
		    c->token ? c->token_from : "", c->token ? ")" : "");
	return ax_err_set(e, "%s: %s", code, detail ? detail : "");
}

ax_err
ax_api_client_call(ax_api_client *c, const char *method, const char *path,
                   const char *ctype, const char *body, size_t len, FILE *out,
                   ax_api_reply *rep)
{
	struct curl_slist *hdr = NULL;
	char               line[1024];
	sink               s = { .rep = rep, .out = out, .abort = c->abort };
	CURLcode           cc;
	ax_err             rv = AX_OK;

	if (path == NULL)
		return ax_err_set(AX_ELIMIT, "request path too long");
	if ((s.h = curl_easy_init()) == NULL)
		return ax_err_set(AX_ENOMEM, "curl handle");
	char *url = malloc(strlen(c->url) + strlen(path) + 1);
	if (url == NULL) {
		curl_easy_cleanup(s.h);
		return ax_err_set(AX_ENOMEM, "url");
	}
	strcpy(url, c->url);
	strcat(url, path);
	curl_easy_setopt(s.h, CURLOPT_URL, url);
	curl_easy_setopt(s.h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(s.h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(s.h, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(s.h, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
	curl_easy_setopt(s.h, CURLOPT_NOSIGNAL, 1L);
	if (out == NULL)
		curl_easy_setopt(s.h, CURLOPT_TIMEOUT, REQUEST_TIMEOUT_S);
	if (c->abort != NULL) {
		curl_easy_setopt(s.h, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(s.h, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(s.h, CURLOPT_XFERINFODATA, &s);
	}
	if (c->token != NULL) {
		snprintf(line, sizeof(line), "Authorization: Bearer %s",
		         c->token);
		hdr = curl_slist_append(hdr, line);
	}
	hdr = curl_slist_append(hdr, "Expect:");
	hdr = curl_slist_append(hdr, "Accept: application/json");
	if (c->idem != NULL && strcmp(method, "POST") == 0) {
		snprintf(line, sizeof(line), "Idempotency-Key: %s", c->idem);
		hdr = curl_slist_append(hdr, line);
	}
	if (body != NULL) {
		snprintf(line, sizeof(line), "Content-Type: %s",
		         ctype ? ctype : "application/json");
		hdr = curl_slist_append(hdr, line);
		curl_easy_setopt(s.h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(s.h, CURLOPT_POSTFIELDSIZE_LARGE,
		                 (curl_off_t) len);
	} else if (strcmp(method, "POST") == 0) {
		curl_easy_setopt(s.h, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(s.h, CURLOPT_POSTFIELDSIZE, 0L);
	}
	curl_easy_setopt(s.h, CURLOPT_HTTPHEADER, hdr);
	cc = curl_easy_perform(s.h);
	curl_easy_getinfo(s.h, CURLINFO_RESPONSE_CODE, &rep->status);
	if (rep->body != NULL)
		rep->json = json_loadb(rep->body, rep->len, 0, NULL);
	if (s.oom)
		rv = ax_err_set(AX_ENOMEM, "answer of %s %s", method, path);
	else if (cc == CURLE_ABORTED_BY_CALLBACK)
		rv = ax_err_set(AX_ECLOSED, "%s %s%s: interrupted", method,
		                c->url, path);
	else if (cc == CURLE_COULDNT_CONNECT)
		rv = ax_err_set(AX_EIO,
		                "cannot reach ax-api at %s: is it running?",
		                c->url);
	else if (cc != CURLE_OK && rep->status == 0)
		rv = ax_err_set(AX_EIO, "cannot reach ax-api at %s: %s",
		                c->url, curl_easy_strerror(cc));
	else if (rep->status < 200 || rep->status >= 300)
		rv = http_error(c, rep);
	else if (cc != CURLE_OK)
		rv = ax_err_set(AX_EIO, "%s %s%s: %s", method, c->url, path,
		                curl_easy_strerror(cc));
	curl_slist_free_all(hdr);
	curl_easy_cleanup(s.h);
	free(url);
	return rv;
}

/* Hands the reply's JSON to *out (a 2xx without a JSON body: {}). */
static ax_err
take_json(ax_api_reply *rep, const char *path, json_t **out)
{
	if (rep->json == NULL && rep->len > 0)
		return ax_err_set(AX_EPROTO, "answer to %s is not JSON", path);
	*out      = rep->json ? rep->json : json_object();
	rep->json = NULL;
	return *out ? AX_OK : ax_err_set(AX_ENOMEM, "json");
}

ax_err
ax_api_client_get(ax_api_client *c, const char *path, json_t **out)
{
	ax_api_reply rep = { 0 };
	ax_err       rv;

	*out = NULL;
	rv   = ax_api_client_call(c, "GET", path, NULL, NULL, 0, NULL, &rep);
	if (rv == AX_OK)
		rv = take_json(&rep, path, out);
	ax_api_reply_fini(&rep);
	return rv;
}

ax_err
ax_api_client_post(ax_api_client *c, const char *path, json_t *body,
                   json_t **out)
{
	return ax_api_client_json(c, "POST", path, body, out);
}

ax_err
ax_api_client_json(ax_api_client *c, const char *method, const char *path,
                   json_t *body, json_t **out)
{
	ax_api_reply rep  = { 0 };
	char        *text = NULL;
	ax_err       rv;

	*out = NULL;
	if (body != NULL && (text = json_dumps(body, JSON_COMPACT)) == NULL)
		return ax_err_set(AX_ENOMEM, "request body");
	rv = ax_api_client_call(c, method, path, "application/json", text,
	                        text ? strlen(text) : 0, NULL, &rep);
	if (rv == AX_OK)
		rv = take_json(&rep, path, out);
	ax_api_reply_fini(&rep);
	free(text);
	return rv;
}

/* ---- paths -------------------------------------------------------------- */

static void
put(ax_api_path *p, const char *s, int encode)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s != '\0' && !p->overflow; s++) {
		unsigned char ch    = (unsigned char) *s;
		int           plain = !encode || (ch >= 'a' && ch <= 'z') ||
		    (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		    ch == '-' || ch == '_' || ch == '.' || ch == '~';
		size_t need = plain ? 1 : 3;
		if (p->len + need >= sizeof(p->buf)) {
			p->overflow = 1;
			break;
		}
		if (plain) {
			p->buf[p->len++] = (char) ch;
		} else {
			p->buf[p->len++] = '%';
			p->buf[p->len++] = hex[ch >> 4];
			p->buf[p->len++] = hex[ch & 15];
		}
	}
	p->buf[p->len] = '\0';
}

void
ax_api_path_init(ax_api_path *p, const char *lit)
{
	memset(p, 0, sizeof(*p));
	put(p, lit, 0);
}

void
ax_api_path_lit(ax_api_path *p, const char *lit)
{
	put(p, lit, 0);
}

void
ax_api_path_seg(ax_api_path *p, const char *seg)
{
	put(p, seg, 1);
}

void
ax_api_path_query(ax_api_path *p, const char *key, const char *value)
{
	if (value == NULL)
		return;
	put(p, p->nq++ ? "&" : "?", 0);
	put(p, key, 1);
	put(p, "=", 0);
	put(p, value, 1);
}

const char *
ax_api_path_str(const ax_api_path *p)
{
	return p->overflow ? NULL : p->buf;
}

int
ax_api_fail(const char *prog)
{
	fprintf(stderr, "%s: %s\n", prog, ax_err_detail());
	return 1;
}
