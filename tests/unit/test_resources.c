/*
 * test_resources.c - named resources (engine/resources.c): names, the
 * "gpu=1, ssd=2" form with its errors, set arithmetic and the fit check
 * the resource detector admits by.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <string.h>

#include "resources.h"

Test(resources, names)
{
	cr_assert(ax_res_name_ok("gpu"));
	cr_assert(ax_res_name_ok("nvidia.com_gpu-a100"));
	cr_assert(!ax_res_name_ok(""));
	cr_assert(!ax_res_name_ok("-gpu"));
	cr_assert(!ax_res_name_ok("g pu"));
	cr_assert(!ax_res_name_ok("gpu/1"));
	cr_assert(!ax_res_name_ok("cpu"), "cpu has its own field");
	cr_assert(!ax_res_name_ok("memory"), "memory has its own field");
	char longname[AX_RES_NAME_MAX + 2];
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	cr_assert(!ax_res_name_ok(longname));
	longname[AX_RES_NAME_MAX] = '\0';
	cr_assert(ax_res_name_ok(longname));
}

Test(resources, parse_good)
{
	ax_res_set s;
	cr_assert_eq(ax_res_parse("gpu=2, ssd=1", "k", &s), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(s.n, 2);
	cr_assert_eq(ax_res_get(&s, "gpu"), 2);
	cr_assert_eq(ax_res_get(&s, "ssd"), 1);
	cr_assert_eq(ax_res_get(&s, "tpu"), 0);
	cr_assert_eq(ax_res_parse("", "k", &s), AX_OK);
	cr_assert_eq(s.n, 0);
	cr_assert_eq(ax_res_parse(" ,gpu=1000000000,", "k", &s), AX_OK);
	cr_assert_eq(ax_res_get(&s, "gpu"), AX_RES_AMOUNT_MAX);
}

typedef struct {
	char in[96];
	char detail[64]; /* part of the error detail */
} bad_case;

ParameterizedTestParameters(resources, parse_bad)
{
	static bad_case c[] = {
		{ "gpu", "'gpu' is not name=amount" },
		{ "gpu=", "amount of 'gpu' must be a whole number" },
		{ "gpu=0", "from 1 to" },
		{ "gpu=-1", "got '-1'" },
		{ "gpu=1.5", "got '1.5'" },
		{ "gpu=1000000001", "from 1 to 1000000000" },
		{ "cpu=2", "cpu and memory have their own keys" },
		{ "g/pu=2", "not a resource name" },
		{ "=2", "not name=amount" },
		{ "gpu=1, gpu=2", "'gpu' is given twice" },
		{ "a=1 b=1 c=1 d=1 e=1 f=1 g=1 h=1 i=1 j=1 k=1 l=1 m=1 n=1 "
		  "o=1 p=1 q=1",
		  "more than 16 named resources" },
	};
	return cr_make_param_array(bad_case, c, sizeof(c) / sizeof(c[0]));
}

ParameterizedTest(bad_case *c, resources, parse_bad)
{
	ax_res_set s;
	cr_assert_eq(ax_res_parse(c->in, "worker.resources", &s), AX_ECONFIG,
	             "'%s' accepted", c->in);
	cr_assert(strstr(ax_err_detail(), c->detail) != NULL,
	          "'%s': detail '%s' lacks '%s'", c->in, ax_err_detail(),
	          c->detail);
	cr_assert(strstr(ax_err_detail(), "worker.resources") != NULL,
	          "the detail does not name the key: %s", ax_err_detail());
}

Test(resources, add_and_remove)
{
	ax_res_set s = { .n = 0 };
	cr_assert_eq(ax_res_add(&s, "gpu", 2), AX_OK);
	cr_assert_eq(ax_res_add(&s, "gpu", 1), AX_OK);
	cr_assert_eq(ax_res_get(&s, "gpu"), 3);
	cr_assert_eq(ax_res_add(&s, "gpu", -3), AX_OK);
	cr_assert_eq(s.n, 0, "an amount down to 0 leaves the set");
	cr_assert_eq(ax_res_add(&s, "gpu", -1), AX_OK);
	cr_assert_eq(s.n, 0, "removing an absent one adds nothing");
	for (int i = 0; i < AX_RES_MAX; i++) {
		char n[8];
		snprintf(n, sizeof(n), "r%d", i);
		cr_assert_eq(ax_res_add(&s, n, 1), AX_OK);
	}
	cr_assert_eq(ax_res_add(&s, "one_more", 1), AX_ELIMIT);
	cr_assert_eq(ax_res_add(&s, "r3", 1), AX_OK, "a known one still adds");
	cr_assert_eq(ax_res_get(&s, "r3"), 2);
}

typedef struct {
	char need[32], offer[32], used[32];
	char short_of[8]; /* "": fits */
} fit_case;

ParameterizedTestParameters(resources, fit)
{
	static fit_case c[] = {
		{ "", "", "", "" },
		{ "gpu=1", "gpu=2", "", "" },
		{ "gpu=1", "gpu=2", "gpu=1", "" },
		{ "gpu=1", "gpu=2", "gpu=2", "gpu" },
		{ "gpu=2", "gpu=2", "gpu=1", "gpu" },
		/* nothing of it used: runs alone even when larger */
		{ "gpu=4", "gpu=2", "", "" },
		/* no worker offers it: never fits */
		{ "tpu=1", "gpu=8", "", "tpu" },
		{ "gpu=1, ssd=1", "gpu=2, ssd=1", "ssd=1", "ssd" },
		{ "gpu=1, ssd=1", "gpu=2, ssd=2", "gpu=1, ssd=1", "" },
	};
	return cr_make_param_array(fit_case, c, sizeof(c) / sizeof(c[0]));
}

ParameterizedTest(fit_case *c, resources, fit)
{
	ax_res_set need, offer, used;
	cr_assert_eq(ax_res_parse(c->need, "need", &need), AX_OK);
	cr_assert_eq(ax_res_parse(c->offer, "offer", &offer), AX_OK);
	cr_assert_eq(ax_res_parse(c->used, "used", &used), AX_OK);
	const char *s = ax_res_short(need.v, (size_t) need.n, &offer, &used);
	if (c->short_of[0] == '\0')
		cr_assert_null(s, "need %s of %s with %s used: short of %s",
		               c->need, c->offer, c->used, s);
	else
		cr_assert(s != NULL && strcmp(s, c->short_of) == 0,
		          "need %s of %s with %s used: short of %s, want %s",
		          c->need, c->offer, c->used, s ? s : "nothing",
		          c->short_of);
}
