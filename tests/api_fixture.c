/*
 * api_fixture.c - an in-process ax-api on a throwaway PostgreSQL for
 * tests (see api_fixture.h).
 */
#include "api_fixture.h"

#include <criterion/criterion.h>
#include <curl/curl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_fixture.h"

void
ax_api_fixture_start(ax_api_fixture *f, size_t max_body)
{
	ax_api_options o = { .max_body = max_body, .pool_size = 3 };

	ax_api_fixture_start_with(f, &o);
}

void
ax_api_fixture_start_with(ax_api_fixture *f, const ax_api_options *opts)
{
	ax_api_options o = *opts;

	memset(f, 0, sizeof(*f));
	cr_assert_eq(ax_test_pg_start_migrated(&f->pg), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(f->pg), &f->st), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(
	    ax_api_token_create(f->st, AX_API_ROLE_ADMIN, "a", f->admin, NULL),
	    AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_api_token_create(f->st, AX_API_ROLE_OPERATOR, "o",
	                                 f->oper, NULL),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_api_token_create(f->st, AX_API_ROLE_VIEWER, "v",
	                                 f->viewer, NULL),
	             AX_OK, "%s", ax_err_detail());
	o.dsn = ax_test_pg_dsn(f->pg);
	cr_assert_eq(ax_api_server_start(&o, &f->srv), AX_OK, "%s",
	             ax_err_detail());
	snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%d",
	         ax_api_server_port(f->srv));
	f->listener = PQconnectdb(ax_test_pg_dsn(f->pg));
	cr_assert_eq(PQstatus(f->listener), CONNECTION_OK);
	PQclear(PQexec(f->listener, "LISTEN ax_control"));
}

void
ax_api_fixture_stop(ax_api_fixture *f)
{
	if (f->listener != NULL)
		PQfinish(f->listener);
	ax_api_server_stop(f->srv);
	ax_store_close(f->st);
	ax_test_pg_stop(f->pg);
	memset(f, 0, sizeof(*f));
}

void
ax_api_fixture_sql(ax_api_fixture *f, const char *fmt, ...)
{
	char    q[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(q, sizeof(q), fmt, ap);
	va_end(ap);
	cr_assert_eq(ax_store_exec(f->st, q, 0, NULL), AX_OK, "%s: %s", q,
	             ax_err_detail());
}

int64_t
ax_api_fixture_int(ax_api_fixture *f, const char *fmt, ...)
{
	int64_t v;
	va_list ap;

	va_start(ap, fmt);
	v = ax_test_q_intv(f->st, fmt, ap);
	va_end(ap);
	return v;
}

json_t *
ax_api_fixture_notify(ax_api_fixture *f)
{
	for (int i = 0; i < 30; i++) {
		PGnotify *n;
		PQconsumeInput(f->listener);
		if ((n = PQnotifies(f->listener)) != NULL) {
			json_t *j = json_loads(n->extra, 0, NULL);
			PQfreemem(n);
			return j;
		}
		struct pollfd p = { .fd     = PQsocket(f->listener),
			            .events = POLLIN };
		poll(&p, 1, 100);
	}
	return NULL;
}

void
ax_api_fixture_drain(ax_api_fixture *f)
{
	PGnotify *n;

	PQconsumeInput(f->listener);
	while ((n = PQnotifies(f->listener)) != NULL)
		PQfreemem(n);
}

void
ax_api_fixture_ans_fini(ax_api_fixture_ans *a)
{
	free(a->raw);
	json_decref(a->json);
	memset(a, 0, sizeof(*a));
}

static size_t
ans_body(char *p, size_t sz, size_t n, void *u)
{
	ax_api_fixture_ans *a   = u;
	size_t              len = a->raw ? strlen(a->raw) : 0;
	char               *nb  = realloc(a->raw, len + sz * n + 1);

	cr_assert_not_null(nb);
	memcpy(nb + len, p, sz * n);
	nb[len + sz * n] = '\0';
	a->raw           = nb;
	return sz * n;
}

long
ax_api_fixture_req(ax_api_fixture *f, const char *method, const char *path,
                   const char *token, const char *body, ax_api_fixture_ans *a)
{
	CURL              *c = curl_easy_init();
	struct curl_slist *h = NULL;
	char               url[1024], auth[128];

	ax_api_fixture_ans_fini(a);
	cr_assert_not_null(c);
	snprintf(url, sizeof(url), "%s%s", f->url, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, ans_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
	if (token != NULL) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s",
		         token);
		h = curl_slist_append(h, auth);
	}
	h = curl_slist_append(h, "Expect:");
	h = curl_slist_append(h, "Content-Type: application/json");
	if (body != NULL)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	CURLcode rc = curl_easy_perform(c);
	cr_assert_eq(rc, CURLE_OK, "%s %s: %s", method, path,
	             curl_easy_strerror(rc));
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a->status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	if (a->raw == NULL)
		a->raw = strdup("");
	a->json = json_loads(a->raw, 0, NULL);
	return a->status;
}
