#include <criterion/criterion.h>
#include <string.h>

#include "ax_err.h"

Test(ax_err, every_code_has_text_and_name)
{
	for (int e = 0; e < AX_ERR_COUNT_; e++) {
		cr_expect_str_neq(ax_strerror((ax_err) e), "unknown error",
		                  "code %d has no text", e);
		cr_expect_str_neq(ax_errname((ax_err) e), "AX_EUNKNOWN",
		                  "code %d has no name", e);
	}
	cr_expect_str_eq(ax_strerror((ax_err) 9999), "unknown error");
}

Test(ax_err, detail_is_kept_per_thread_until_next_set)
{
	ax_err e = ax_err_set(AX_EINVAL, "key %s: bad", "x");
	cr_assert_eq(e, AX_EINVAL);
	cr_assert_str_eq(ax_err_detail(), "key x: bad");
	ax_err_clear();
	cr_assert_str_eq(ax_err_detail(), "");
}
