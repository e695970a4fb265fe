/*
 * cmd_cron.c - `axctl cron next`: shows when a cron expression fires.
 *
 * Role: lets a DAG author check an expression and its time zone before
 * submitting: `axctl cron next '0 30 2 * * ?' --tz Asia/Shanghai
 * --from 2026-03-29T00:00:00Z --count 3` prints one ISO 8601 local time
 * with its UTC offset per line. Exit 0 ok, 1 invalid expression or zone
 * (the message points at the field), 2 usage error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "axctl.h"
#include "cmd_cron.h"
#include "clock.h"
#include "cron.h"
#include "tz.h"

#define CRON_MAX_COUNT 100000

static void
cron_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: axctl cron next 'EXPR' [--tz ZONE] [--from ISO8601] "
	    "[--count N]\n\n"
	    "Prints the next N fire times of EXPR strictly after --from, "
	    "one per line,\nas ISO 8601 local time with the UTC offset.\n\n"
	    "  EXPR          5-field Unix cron, 6/7-field Quartz cron "
	    "(seconds first)\n"
	    "                or @yearly @monthly @weekly @daily @hourly\n"
	    "  --tz ZONE     IANA time zone (default UTC)\n"
	    "  --from TIME   e.g. 2026-03-29T00:00:00Z (default now; "
	    "without an\n"
	    "                offset the time is read in --tz)\n"
	    "  --count N     how many (default 5, at most %d)\n\n"
	    "Exit status: 0 ok, 1 invalid expression or zone, 2 usage "
	    "error.\n",
	    CRON_MAX_COUNT);
}

/* Prints expr with a caret under the failing part of the field. */
static void
print_caret(const char *expr, const ax_cron_err *e)
{
	size_t len = strlen(expr);
	size_t fs  = e->field_offset < len ? e->field_offset : len;
	size_t fe  = fs + e->field_len <= len ? fs + e->field_len : len;
	size_t at  = e->offset < len ? e->offset : len;

	fprintf(stderr, "  %s\n  ", expr);
	for (size_t i = 0; i < fs && i < at; i++)
		fputc(expr[i] == '\t' ? '\t' : ' ', stderr);
	for (size_t i = fs; i < at; i++)
		fputc('~', stderr);
	fputc('^', stderr);
	for (size_t i = at + 1; i < fe; i++)
		fputc('~', stderr);
	fputc('\n', stderr);
}

/* Value of option argv[*i] (--opt VALUE or --opt=VALUE), or NULL. */
static const char *
opt_value(int argc, char **argv, int *i, const char *name)
{
	size_t n = strlen(name);
	if (strncmp(argv[*i], name, n) != 0)
		return NULL;
	if (argv[*i][n] == '=')
		return argv[*i] + n + 1;
	if (argv[*i][n] != '\0')
		return NULL;
	if (*i + 1 >= argc) {
		fprintf(stderr, "axctl cron: %s needs a value\n", name);
		return "";
	}
	return argv[++*i];
}

static int
cron_next(int argc, char **argv)
{
	const char *expr = NULL, *zone = "UTC", *from = NULL, *count_s = NULL;
	long        count = 5;

	for (int i = 1; i < argc; i++) {
		const char *v;
		if (strcmp(argv[i], "--help") == 0 ||
		    strcmp(argv[i], "-h") == 0) {
			cron_usage(stdout);
			return 0;
		}
		if ((v = opt_value(argc, argv, &i, "--tz")) != NULL)
			zone = v;
		else if ((v = opt_value(argc, argv, &i, "--from")) != NULL)
			from = v;
		else if ((v = opt_value(argc, argv, &i, "--count")) != NULL)
			count_s = v;
		else if (argv[i][0] == '-' && argv[i][1] == '-') {
			fprintf(stderr, "axctl cron: unknown option '%s'\n",
			        argv[i]);
			cron_usage(stderr);
			return 2;
		} else if (expr == NULL)
			expr = argv[i];
		else {
			fprintf(stderr,
			        "axctl cron: unexpected argument '%s' (quote "
			        "the expression: 'M H DOM MON DOW')\n",
			        argv[i]);
			return 2;
		}
		if (v != NULL && v[0] == '\0') {
			cron_usage(stderr);
			return 2;
		}
	}
	if (expr == NULL) {
		fprintf(stderr, "axctl cron next: missing EXPR\n");
		cron_usage(stderr);
		return 2;
	}
	if (count_s != NULL) {
		char *end;
		errno = 0;
		count = strtol(count_s, &end, 10);
		if (errno != 0 || *end != '\0' || count < 1 ||
		    count > CRON_MAX_COUNT) {
			fprintf(stderr,
			        "axctl cron: --count '%s': expected a number "
			        "from 1 to %d\n",
			        count_s, CRON_MAX_COUNT);
			return 2;
		}
	}

	ax_cron    *c  = NULL;
	ax_tz      *tz = NULL;
	ax_cron_err e;
	int64_t     t;
	int         rc = 0;

	if (ax_cron_parse(expr, &c, &e) != AX_OK) {
		fprintf(stderr, "axctl: invalid cron expression: %s\n",
		        ax_err_detail());
		if (e.msg[0] != '\0')
			print_caret(expr, &e);
		return 1;
	}
	if (ax_tz_load(zone, &tz) != AX_OK) {
		fprintf(stderr, "axctl: --tz: %s\n", ax_err_detail());
		ax_cron_free(c);
		return 1;
	}
	if (from == NULL)
		t = ax_clock_utc_us();
	else if (ax_tz_parse_iso8601(from, tz, &t) != AX_OK) {
		fprintf(stderr, "axctl cron: --from: %s\n", ax_err_detail());
		rc = 2;
		goto out;
	}
	for (long i = 0; i < count; i++) {
		char buf[48];
		if (ax_cron_next(c, tz, t, &t) != AX_OK) {
			fprintf(stderr, "axctl cron: %s\n", ax_err_detail());
			break;
		}
		printf("%s\n", ax_tz_format(tz, t, buf, sizeof(buf)));
	}
out:
	ax_tz_free(tz);
	ax_cron_free(c);
	return rc;
}

/* `axctl cron SUBCOMMAND ...`; argv[0] is "cron". */
int
ax_cmd_cron(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
		cron_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (strcmp(argv[1], "next") == 0)
		return cron_next(argc - 1, argv + 1);
	fprintf(stderr, "axctl cron: unknown subcommand '%s' (try: next)\n",
	        argv[1]);
	return 2;
}
