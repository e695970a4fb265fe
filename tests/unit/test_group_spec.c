/*
 * test_group_spec.c - a task's worker group as text (engine/group_spec.h):
 * one name, a list, a label selector; labels as workers declare them;
 * matching; and the errors that name the bad term and the fix.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "group_spec.h"
#include "utf8.h"

Test(group_spec, one_name_a_list_and_a_selector)
{
	ax_group_spec g;

	cr_assert_eq(ax_group_spec_parse("etl", &g), AX_OK);
	cr_assert_eq(g.kind, AX_GSPEC_NAME);
	cr_assert_eq(g.n, 1);
	cr_assert_str_eq(g.names[0], "etl");
	cr_assert_eq(ax_group_spec_parse("", &g), AX_OK);
	cr_assert_str_eq(g.names[0], "default");
	cr_assert_eq(ax_group_spec_parse(NULL, &g), AX_OK);
	cr_assert_str_eq(g.names[0], "default");

	cr_assert_eq(ax_group_spec_parse("gpu-a, gpu-b,zone:east", &g), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_eq(g.kind, AX_GSPEC_ANY);
	cr_assert_eq(g.n, 3);
	cr_assert_str_eq(g.names[0], "gpu-a");
	cr_assert_str_eq(g.names[1], "gpu-b");
	cr_assert_str_eq(g.names[2], "zone:east");

	cr_assert_eq(ax_group_spec_parse("gpu=a100, zone=east", &g), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_eq(g.kind, AX_GSPEC_LABELS);
	cr_assert_eq(g.n, 2);
	cr_assert_str_eq(g.labels[0].key, "gpu");
	cr_assert_str_eq(g.labels[0].value, "a100");
	cr_assert_str_eq(g.labels[1].key, "zone");
	cr_assert_str_eq(g.labels[1].value, "east");

	cr_assert(!ax_group_spec_multi("etl"));
	cr_assert(!ax_group_spec_multi(NULL));
	cr_assert(ax_group_spec_multi("a,b"));
	cr_assert(ax_group_spec_multi("gpu=a100"));
}

Test(group_spec, a_selector_matches_groups_carrying_every_label)
{
	ax_label have[3], sel[2];
	size_t   nh, ns;

	cr_assert_eq(
	    ax_labels_parse("zone=east, gpu=a100, rack=r1", "t", have, 3, &nh),
	    AX_OK);
	cr_assert_eq(nh, 3);
	cr_assert_eq(ax_labels_parse("gpu=a100,zone=east", "t", sel, 2, &ns),
	             AX_OK);
	cr_assert(ax_labels_match(sel, ns, have, nh));
	cr_assert_eq(ax_labels_parse("gpu=h100", "t", sel, 2, &ns), AX_OK);
	cr_assert(!ax_labels_match(sel, ns, have, nh), "another value");
	cr_assert_eq(ax_labels_parse("gpu=a100,ssd=yes", "t", sel, 2, &ns),
	             AX_OK);
	cr_assert(!ax_labels_match(sel, ns, have, nh), "a missing key");
	cr_assert(ax_labels_match(sel, 0, have, nh), "no selector");
	cr_assert(!ax_labels_match(sel, ns, have, 0), "no labels");
	cr_assert_eq(ax_labels_parse("", "t", have, 3, &nh), AX_OK);
	cr_assert_eq(nh, 0);
}

Test(group_spec, labels_text_is_canonical)
{
	ax_label a[2], b[2];
	size_t   na, nb;
	char     ta[64], tb[64], small[8];

	cr_assert_eq(ax_labels_parse("zone=east,gpu=a100", "t", a, 2, &na),
	             AX_OK);
	cr_assert_eq(
	    ax_labels_parse(" gpu = a100 , zone=east", "t", b, 2, &nb), AX_OK);
	cr_assert_str_eq(ax_labels_text(a, na, ta, sizeof(ta)),
	                 "gpu=a100,zone=east");
	cr_assert_str_eq(ax_labels_text(b, nb, tb, sizeof(tb)), ta);
	cr_assert_str_eq(ax_labels_text(a, na, small, sizeof(small)), "",
	                 "a text cut short must not pass for a smaller set");
}

typedef struct bad {
	char text[96];
	char says[64];
} bad;

ParameterizedTestParameters(group_spec, bad_specs_name_the_term)
{
	static bad v[] = {
		{ "gpu a", "'gpu a' is not a group name" },
		{ "a,,b", "'' is not a group name" },
		{ "a,b,", "'' is not a group name" },
		{ "a,a", "'a' listed twice" },
		{ "a;rm -rf /", "is not a group name" },
		{ "gpu=", "value '' of label 'gpu'" },
		{ "=a100", "label key ''" },
		{ "gpu=a100,zone", "'zone' is not a label; write key=value" },
		{ "gpu=a1 00", "value 'a1 00'" },
		{ "gpu=a100,gpu=h100", "label 'gpu' given twice" },
		{ "gpu=a100,", "ends with ','" },
		{ "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", "more than 16 groups" },
		{ "\xff\xfe", "is not a group name" },
	};
	return cr_make_param_array(bad, v, sizeof(v) / sizeof(v[0]));
}

ParameterizedTest(bad *b, group_spec, bad_specs_name_the_term)
{
	ax_group_spec g;
	cr_assert_eq(ax_group_spec_parse(b->text, &g), AX_EINVAL,
	             "%s accepted", b->text);
	cr_assert(strstr(ax_err_detail(), b->says) != NULL,
	          "'%s' says '%s', not '%s'", b->text, ax_err_detail(),
	          b->says);
	cr_assert(ax_utf8_valid(ax_err_detail(), strlen(ax_err_detail())));
}

Test(group_spec, group_names)
{
	cr_assert(ax_group_name_ok("gpu-a"));
	cr_assert(ax_group_name_ok("yarn:root.etl"));
	cr_assert(!ax_group_name_ok("a,b"));
	cr_assert(!ax_group_name_ok("k=v"));
	cr_assert(!ax_group_name_ok(""));
	cr_assert(!ax_group_name_ok(NULL));
}
