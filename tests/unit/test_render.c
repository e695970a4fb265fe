#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"

/* 2026-03-28T18:30:00Z is 2026-03-29 02:30 in Asia/Shanghai (+08:00) */
#define LOGICAL 1774722600000000LL
#define HOUR_US 3600000000LL

static ax_render_ctx
ctx(void)
{
	static const ax_render_param params[] = {
		{ "table", "ods.orders" },
		{ "region", "eu" },
	};
	ax_render_ctx c = {
		.logical_date_us   = LOGICAL,
		.interval_start_us = LOGICAL,
		.interval_end_us   = LOGICAL + 24 * HOUR_US,
		.utc_offset_s      = 8 * 3600,
		.run_id            = "0b9f7f0e-1c2d-4e5f-8a9b-0c1d2e3f4a5b",
		.dag_name          = "demo.diamond",
		.task_name         = "a",
		.shard_index       = 2,
		.shard_total       = 4,
		.params            = params,
		.n_params          = 2,
	};
	return c;
}

struct rcase {
	char tmpl[128];
	char want[128];
};

ParameterizedTestParameters(render, renders)
{
	static struct rcase cases[] = {
		{ "echo {{ ds }}", "echo 2026-03-29" },
		{ "{{ds_nodash}}", "20260329" },
		{ "{{ ts }}", "2026-03-29T02:30:00+08:00" },
		{ "{{ logical_date }}", "2026-03-29T02:30:00+08:00" },
		{ "{{ data_interval_start }}", "2026-03-29T02:30:00+08:00" },
		{ "{{ data_interval_end }}", "2026-03-30T02:30:00+08:00" },
		{ "{{ run_id }}", "0b9f7f0e-1c2d-4e5f-8a9b-0c1d2e3f4a5b" },
		{ "{{ dag.name }}/{{ task.name }}", "demo.diamond/a" },
		{ "{{ shard.index }} of {{ shard.total }}", "2 of 4" },
		{ "{{ params.table }}", "ods.orders" },
		{ "{{ ds | add_days(-1) }}", "2026-03-28" },
		{ "{{ ds | add_days(3) }}", "2026-04-01" },
		{ "{{ ds_nodash | add_days(-29) }}", "20260228" },
		{ "{{ ts | add_hours(-3) }}", "2026-03-28T23:30:00+08:00" },
		{ "{{ ts | add_minutes(45) }}", "2026-03-29T03:15:00+08:00" },
		{ "{{ ds | format('%Y/%m/%d') }}", "2026/03/29" },
		{ "{{ ds | add_days(-1) | format(\"%d.%m.%Y\") }}",
		  "28.03.2026" },
		{ "a {{ '{{' }} b }}", "a {{ b }}" },
		{ "no templates here: ${HOME} {x}",
		  "no templates here: ${HOME} {x}" },
		{ "", "" },
		{ "{{ds}}{{ds_nodash}}", "2026-03-2920260329" },
	};
	return cr_make_param_array(struct rcase, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct rcase *c, render, renders)
{
	ax_render_ctx k   = ctx();
	char         *out = NULL;
	ax_render_err e;
	ax_err        rv = ax_render(c->tmpl, &k, &out, &e);
	cr_assert_eq(rv, AX_OK, "'%s': %s", c->tmpl, ax_err_detail());
	cr_assert_str_eq(out, c->want, "'%s'", c->tmpl);
	free(out);
	/* whatever renders also passes check mode */
	const char *names[] = { "table", "region" };
	cr_assert_eq(ax_render_check(c->tmpl, names, 2, 0, NULL, NULL), 0,
	             "'%s'", c->tmpl);
}

struct ecase {
	char   tmpl[128];
	size_t offset;
	char   msg[200];
};

ParameterizedTestParameters(render, errors)
{
	static struct ecase cases[] = {
		{ "echo {{ dss }}", 8,
		  "unknown template variable 'dss'; did you mean 'ds'?" },
		{ "{{ params.tabel }}", 3,
		  "unknown template variable 'params.tabel'; declare 'tabel' "
		  "under params" },
		{ "x {{ ds", 2, "unterminated '{{': missing '}}'" },
		{ "{{ }}", 0,
		  "empty '{{ }}'; write a variable, e.g. {{ ds }}" },
		{ "{{ ds | add_dayz(1) }}", 8,
		  "unknown filter 'add_dayz'; did you mean 'add_days'?" },
		{ "{{ run_id | add_days(1) }}", 12,
		  "filter 'add_days' needs a date value (ds, ts, "
		  "logical_date, "
		  "data_interval_start, data_interval_end)" },
		{ "{{ ds | add_days('x') }}", 8,
		  "filter 'add_days' takes one integer argument, e.g. "
		  "add_days(-1)" },
		{ "{{ ds | add_days }}", 8,
		  "filter 'add_days' takes one integer argument, e.g. "
		  "add_days(-1)" },
		{ "{{ ds ds }}", 6,
		  "expected '|' or '}}' after the value, got 'd'" },
		{ "{{ ds | add_days(999999) }}", 17,
		  "argument 999999 of 'add_days' is out of range "
		  "-100000..100000" },
		{ "{{ shard }}", 3, "unknown template variable 'shard'" },
	};
	return cr_make_param_array(struct ecase, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct ecase *c, render, errors)
{
	ax_render_ctx k   = ctx();
	char         *out = (char *) 1;
	ax_render_err e;
	ax_err        rv = ax_render(c->tmpl, &k, &out, &e);
	cr_assert_eq(rv, AX_EPARSE, "'%s'", c->tmpl);
	cr_assert_null(out, "no partial output on error");
	cr_assert_str_eq(e.msg, c->msg, "'%s'", c->tmpl);
	cr_assert_eq(e.offset, c->offset, "'%s': offset %zu", c->tmpl,
	             e.offset);
	cr_assert(strstr(ax_err_detail(), c->msg) != NULL);
}

struct seen {
	size_t n;
	size_t off[8];
	char   msg[8][200];
};

static void
collect(void *arg, size_t off, const char *msg)
{
	struct seen *s = arg;
	if (s->n < 8) {
		s->off[s->n] = off;
		snprintf(s->msg[s->n], sizeof(s->msg[0]), "%s", msg);
	}
	s->n++;
}

Test(render, check_mode_reports_every_error)
{
	const char *names[] = { "table" };
	struct seen s       = { 0 };
	size_t      n       = ax_render_check(
	               "{{ ds }} {{ dss }} {{ params.table }} {{ params.x }} {{ tss }}",
	               names, 1, 0, collect, &s);
	cr_assert_eq(n, 3);
	cr_assert_eq(s.n, 3);
	cr_assert_eq(s.off[0], 12);
	cr_assert_eq(s.off[1], 41);
	cr_assert_eq(s.off[2], 56);
	cr_assert_str_eq(
	    s.msg[2], "unknown template variable 'tss'; did you mean 'ts'?");
}

Test(render, check_mode_any_param_and_suggestions)
{
	const char *names[] = { "table", "region" };
	struct seen s       = { 0 };
	cr_assert_eq(
	    ax_render_check("{{ params.whatever }}", NULL, 0, 1, NULL, NULL),
	    0);
	cr_assert_eq(
	    ax_render_check("{{ params.regoin }}", names, 2, 0, collect, &s),
	    1);
	cr_assert_str_eq(s.msg[0],
	                 "unknown template variable 'params.regoin'; declare "
	                 "'regoin' under params (did you mean "
	                 "'params.region'?)");
}

Test(render, negative_offset_and_pre_epoch)
{
	ax_render_ctx k   = ctx();
	char         *out = NULL;
	k.utc_offset_s    = -5 * 3600;
	k.logical_date_us = -1; /* 1969-12-31T23:59:59.999999Z */
	cr_assert_eq(ax_render("{{ ts }} {{ ds }}", &k, &out, NULL), AX_OK);
	cr_assert_str_eq(out, "1969-12-31T18:59:59-05:00 1969-12-31");
	free(out);
}

Test(render, long_param_values_are_copied_whole)
{
	static char     big[4000];
	ax_render_param p = { "blob", big };
	ax_render_ctx   k = ctx();
	char           *out;
	memset(big, 'x', sizeof(big) - 1);
	k.params   = &p;
	k.n_params = 1;
	cr_assert_eq(ax_render("<{{ params.blob }}>", &k, &out, NULL), AX_OK);
	cr_assert_eq(strlen(out), sizeof(big) - 1 + 2);
	free(out);
}

/* --- shell mode: a value is one shell word ------------------------------ */

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shell_quote.h"

/* Renders tmpl in shell mode with params.region = value. */
static ax_err
render_sh(const char *tmpl, const char *value, char **out, ax_render_err *e)
{
	ax_render_param p = { "region", value };
	ax_render_ctx   k = ctx();
	k.params          = &p;
	k.n_params        = 1;
	k.shell           = 1;
	return ax_render(tmpl, &k, out, e);
}

/* Runs script with bash -c in dir; returns the exit status. */
static int
run_bash(const char *script, const char *dir)
{
	pid_t pid = fork();
	int   st;
	if (pid == 0) {
		if (chdir(dir) != 0)
			_exit(126);
		execl("/bin/bash", "bash", "-c", script, (char *) NULL);
		_exit(127);
	}
	cr_assert_gt(pid, 0);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static char *
slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return NULL;
	char  *buf = calloc(1, 65536);
	size_t n   = fread(buf, 1, 65535, f);
	buf[n]     = '\0';
	fclose(f);
	return buf;
}

/* Payloads that try to run `touch pwn`, or to change the words. */
static const char *const payloads[] = {
	"x\"; touch pwn; echo \"",
	"`touch pwn`",
	"$(touch pwn)",
	"'; touch pwn; echo '",
	"x'\"'\"'; touch pwn; '",
	"a\ntouch pwn\nb",
	"a\\",
	"\\\\ \\n \\",
	"$HOME",
	"${HOME}",
	"a b\tc  d",
	"*",
	"}; touch pwn; {",
	"EOF\ntouch pwn\nEOF",
	"x\r\ntouch pwn",
	"$'\\x41'",
	"!!",
	"~",
	"<<EOF",
	"# c",
	"",
	"plain-word_1.2/3:4,5+6@7%8",
};

struct shcase {
	const char *tmpl;   /* writes the value to ./out */
	const char *after;  /* what ./out holds after the value */
	int         nl_ok;  /* 0: a value with a line break is refused */
	int         eof_ok; /* 0: a value with an "EOF" line is refused */
};

static const struct shcase shcases[] = {
	{ "echo \"{{ params.region }}\" > out", "\n", 1, 1 },
	{ "echo {{ params.region }} > out", "\n", 1, 1 },
	{ "printf '%s' {{ params.region }} > out", "", 1, 1 },
	{ "printf '%s' \"<{{ params.region }}>\" > out", ">", 1, 1 },
	{ "printf '%s' '{{ params.region }}' > out", "", 1, 1 },
	{ "printf '%s' x{{ params.region }}y > out", "y", 1, 1 },
	{ "printf '%s' $'{{ params.region }}' > out", "", 1, 1 },
	{ "v=${UNSET:-{{ params.region }}}; printf '%s' \"$v\" > out", "", 1,
	  1 },
	{ "printf '%s' \"$(printf '%s' {{ params.region }})\" > out", "", 1,
	  1 },
	{ "printf '%s' \"$(printf '%s' \"{{ params.region }}\")\" > out", "",
	  1, 1 },
	{ "cat > out <<EOF\n{{ params.region }}\nEOF\n", "\n", 1, 0 },
	{ "cat > out <<-'EOF'\n\t{{ params.region }}\n\tEOF\n", "\n", 1, 0 },
	{ "cat > out <<EOF; true\n"
	  "x {{ params.region }}\n"
	  "EOF\n",
	  "\n", 1, 0 },
	{ "# a comment {{ params.region }}\nprintf '%s' ok > out", NULL, 0,
	  1 },
};

/* The value a template case leaves in ./out (NULL: the fixed "ok"). */
static void
check_case(const struct shcase *c, const char *value, const char *dir)
{
	char         *cmd = NULL, path[512];
	ax_render_err e;
	int nl  = strchr(value, '\n') != NULL || strchr(value, '\r') != NULL;
	int eof = strstr(value, "EOF\n") != NULL ||
	    (strlen(value) >= 3 && !strcmp(value + strlen(value) - 3, "EOF"));
	ax_err rv = render_sh(c->tmpl, value, &cmd, &e);

	if ((!c->nl_ok && nl) || (!c->eof_ok && eof && nl)) {
		cr_assert_eq(rv, AX_EPARSE,
		             "template '%s' value '%s' must be refused",
		             c->tmpl, value);
		cr_assert_null(cmd);
		return;
	}
	cr_assert_eq(rv, AX_OK, "template '%s' value '%s': %s", c->tmpl, value,
	             e.msg);
	snprintf(path, sizeof(path), "%s/pwn", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/out", dir);
	unlink(path);
	int st = run_bash(cmd, dir);
	cr_assert_eq(st, 0, "'%s' exited %d", cmd, st);
	snprintf(path, sizeof(path), "%s/pwn", dir);
	cr_assert_neq(access(path, F_OK), 0, "'%s' ran a command: %s", value,
	              cmd);
	snprintf(path, sizeof(path), "%s/out", dir);
	char *got = slurp(path);
	cr_assert_not_null(got, "'%s' wrote no output", cmd);
	char want[1024];
	if (c->after == NULL)
		snprintf(want, sizeof(want), "ok");
	else if (strstr(c->tmpl, "\"<{{") != NULL)
		snprintf(want, sizeof(want), "<%s%s", value, c->after);
	else if (strstr(c->tmpl, "x{{") != NULL)
		snprintf(want, sizeof(want), "x%s%s", value, c->after);
	else if (strstr(c->tmpl, "x {{") != NULL)
		snprintf(want, sizeof(want), "x %s%s", value, c->after);
	else if (strstr(c->tmpl, "$(printf") != NULL) /* $( ) drops \n */
		snprintf(want, sizeof(want), "%.*s", (int) strcspn(value, ""),
		         value);
	else
		snprintf(want, sizeof(want), "%s%s", value, c->after);
	if (strstr(c->tmpl, "$(printf") != NULL) {
		size_t n = strlen(want);
		while (n > 0 && want[n - 1] == '\n')
			want[--n] = '\0';
	}
	cr_assert_str_eq(got, want, "command: %s", cmd);
	free(got);
	free(cmd);
}

Test(render, shell_values_never_change_the_command)
{
	char dir[] = "/tmp/ax_render_shXXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	for (size_t i = 0; i < sizeof(shcases) / sizeof(shcases[0]); i++)
		for (size_t j = 0; j < sizeof(payloads) / sizeof(payloads[0]);
		     j++)
			check_case(&shcases[i], payloads[j], dir);
	char path[512];
	snprintf(path, sizeof(path), "%s/out", dir);
	unlink(path);
	rmdir(dir);
}

struct qcase {
	char tmpl[96];
	char value[64];
	char want[96];
};

ParameterizedTestParameters(render, shell_quoting)
{
	static struct qcase cases[] = {
		{ "echo {{ params.region }}", "eu-west-1", "echo eu-west-1" },
		{ "echo {{ params.region }}", "", "echo ''" },
		{ "echo {{ params.region }}", "a b", "echo 'a b'" },
		{ "echo {{ params.region }}", "it's", "echo 'it'\\''s'" },
		{ "echo {{ params.region }}", "x=1", "echo 'x=1'" },
		{ "echo \"{{ params.region }}\"",
		  "x\"; touch /tmp/pwn; echo \"",
		  "echo \"x\\\"; touch /tmp/pwn; echo \\\"\"" },
		{ "echo \"{{ params.region }}\"", "`id` $(id) \\",
		  "echo \"\\`id\\` \\$(id) \\\\\"" },
		{ "echo '{{ params.region }}'", "a'b", "echo 'a'\\''b'" },
		{ "echo $'{{ params.region }}'", "a'b\\n",
		  "echo $'a\\'b\\\\n'" },
		{ "cat <<'E'\n{{ params.region }}\nE", "$(id)",
		  "cat <<'E'\n$(id)\nE" },
		{ "cat <<E\n{{ params.region }}\nE", "$(id)",
		  "cat <<E\n\\$(id)\nE" },
		{ "echo $(( {{ shard.index }} + 1 ))", "",
		  "echo $(( 2 + 1 ))" },
		{ "echo {{ ds }} {{ ts }}", "",
		  "echo 2026-03-29 2026-03-29T02:30:00+08:00" },
		{ "echo {{ ds | format('%d %m') }}", "", "echo '29 03'" },
		{ "echo {{ params.region | raw }}", "a; b", "echo a; b" },
		{ "echo {{ '$HOME' }}", "", "echo $HOME" },
		{ "echo {{ dag.name }}", "", "echo demo.diamond" },
		{ "[[ 1 -eq {{ params.region }} ]]", "-5", "[[ 1 -eq -5 ]]" },
		{ "a=(1); echo ${a[{{ params.region }}]}", "0",
		  "a=(1); echo ${a[0]}" },
		{ "echo {a,{{ params.region }}}", "b,c", "echo {a,'b,c'}" },
		{ "echo -e {{ params.region }}; let x=1", "a b",
		  "echo -e 'a b'; let x=1" },
	};
	return cr_make_param_array(struct qcase, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct qcase *c, render, shell_quoting)
{
	char         *out = NULL;
	ax_render_err e;
	cr_assert_eq(render_sh(c->tmpl, c->value, &out, &e), AX_OK, "%s: %s",
	             c->tmpl, e.msg);
	cr_assert_str_eq(out, c->want);
	free(out);
	/* outside shell mode the value is plain text */
	ax_render_param p = { "region", c->value };
	ax_render_ctx   k = ctx();
	k.params          = &p;
	k.n_params        = 1;
	cr_assert_eq(ax_render("{{ params.region }}", &k, &out, &e), AX_OK);
	cr_assert_str_eq(out, c->value);
	free(out);
}

struct rfcase {
	char tmpl[96];
	char value[64];
	char msg[64]; /* a part of the message */
};

ParameterizedTestParameters(render, shell_refusals)
{
	static struct rfcase cases[] = {
		{ "echo \\{{ params.region }}", "a",
		  "after an unquoted '\\'" },
		{ "echo ${{ params.region }}", "HOME", "right after '$'" },
		{ "echo `echo {{ params.region }}`", "a", "use $( ... )" },
		{ "echo \"${X:-{{ params.region }}}\"", "a", "\"${...}\"" },
		{ "echo $(( {{ params.region }} + 1 ))", "1; id",
		  "not an integer" },
		{ "(( {{ params.region }} ))", "a[$(id)]", "not an integer" },
		{ "# {{ params.region }}\ntrue", "x\nid", "shell comment" },
		{ "cat <<EOF\n{{ params.region }}\nEOF", "a\nEOF\nid",
		  "structure" },
		{ "cat <<EOF\nE{{ params.region }}OF\nEOF", "\nE",
		  "delimiter line" },
		{ "cat <<{{ params.region }}\nx\n", "E", "heredoc delimiter" },
		{ "[[ 1 -eq {{ params.region }} ]]", "a[$(id)]",
		  "not an integer" },
		{ "let n={{ params.region }}", "a[$(id)]", "not an integer" },
		{ "a=(1); echo ${a[{{ params.region }}]}", "a[$(id)]",
		  "not an integer" },
		{ "x=$(case a in a) echo {{ params.region }};; esac)", "b",
		  "`case` inside $( )" },
	};
	return cr_make_param_array(struct rfcase, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct rfcase *c, render, shell_refusals)
{
	char         *out = (char *) 1;
	ax_render_err e;
	cr_assert_eq(render_sh(c->tmpl, c->value, &out, &e), AX_EPARSE,
	             "'%s' with '%s' must be refused", c->tmpl, c->value);
	cr_assert_null(out);
	cr_assert(strstr(e.msg, c->msg) != NULL, "'%s': got '%s'", c->tmpl,
	          e.msg);
}

Test(render, shell_word_refuses_nul)
{
	ax_shq q;
	char  *out = (char *) 1;
	char   msg[200];
	ax_shq_init(&q);
	ax_shq_feed(&q, "echo ", 5);
	cr_assert_eq(ax_shq_word(&q, "a\0; id", 6, &out, msg, sizeof(msg)),
	             AX_EINVAL);
	cr_assert_null(out);
	cr_assert(strstr(msg, "NUL") != NULL, "%s", msg);
	/* the state is untouched: a later value still quotes */
	cr_assert_eq(ax_shq_word(&q, "a b", 3, &out, msg, sizeof(msg)), AX_OK);
	cr_assert_str_eq(out, "'a b'");
	free(out);
}

static void
count_raw(void *arg, size_t off, const char *msg)
{
	size_t *n = arg;
	(void) off;
	cr_assert(strstr(msg, "raw") != NULL);
	(*n)++;
}

Test(render, raw_uses_are_reported)
{
	size_t n = 0;
	ax_render_raw_uses("a {{ params.x | raw }} {{ ds }} {{ ds | raw }}",
	                   count_raw, &n);
	cr_assert_eq(n, 2);
	const char *names[] = { "x" };
	cr_assert_eq(
	    ax_render_check("{{ params.x | raw }}", names, 1, 0, NULL, NULL),
	    0);
	cr_assert_eq(ax_render_check("{{ params.x | raw | raw }}", names, 1, 0,
	                             NULL, NULL),
	             1);
}

/* The output limit: a text of AX_RENDER_MAX_OUT - 1 bytes renders whole,
 * one byte more is AX_ELIMIT with no output, for template text and for
 * values alike. */
static char *
xs_then(size_t nx, const char *tail)
{
	char *t = malloc(nx + strlen(tail) + 1);

	cr_assert_not_null(t);
	memset(t, 'x', nx);
	strcpy(t + nx, tail);
	return t;
}

static void
assert_renders(const char *tmpl, size_t want_len)
{
	ax_render_ctx c   = ctx();
	char         *out = NULL;

	cr_assert_eq(ax_render(tmpl, &c, &out, NULL), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_not_null(out);
	cr_assert_eq(strlen(out), want_len);
	free(out);
}

static void
assert_too_long(const char *tmpl)
{
	ax_render_ctx c   = ctx();
	char         *out = (char *) tmpl;

	cr_assert_eq(ax_render(tmpl, &c, &out, NULL), AX_ELIMIT);
	cr_assert_null(out);
	cr_assert(strstr(ax_err_detail(), "longer than") != NULL, "%s",
	          ax_err_detail());
}

Test(render, output_limit_is_exact)
{
	size_t max = AX_RENDER_MAX_OUT;
	char  *t;

	/* template text only */
	t = xs_then(max - 1, "");
	assert_renders(t, max - 1);
	free(t);
	t = xs_then(max, "");
	assert_too_long(t);
	free(t);
	/* the last bytes come from a value ({{ ds }}: 10 bytes) */
	t = xs_then(max - 11, "{{ ds }}");
	assert_renders(t, max - 1);
	free(t);
	t = xs_then(max - 10, "{{ ds }}");
	assert_too_long(t);
	free(t);
}
