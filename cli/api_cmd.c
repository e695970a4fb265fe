/*
 * api_cmd.c - argument parsing and output shared by the axctl API
 * subcommands (see api_cmd.h).
 */
#include "api_cmd.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Finds the flag named a (also "--name=value"); *inline_val gets the
 * value after '='. */
static const ax_api_flag *
find_flag(const ax_api_flag *flags, const char *a, const char **inline_val)
{
	*inline_val = NULL;
	for (const ax_api_flag *f = flags; f && f->name; f++) {
		size_t n = strlen(f->name);
		if (strcmp(a, f->name) == 0 ||
		    (f->alias && strcmp(a, f->alias) == 0))
			return f;
		if (strncmp(a, f->name, n) == 0 && a[n] == '=' && !f->set) {
			*inline_val = a + n + 1;
			return f;
		}
	}
	return NULL;
}

int
ax_api_cmd_sub(const char *tool, const char *const *subs, size_t n, int argc,
               char **argv, void (*usage)(FILE *), int *rc)
{
	const char *sub = argc > 1 ? argv[1] : "";

	for (size_t i = 0; i < n; i++)
		if (strcmp(sub, subs[i]) == 0)
			return 1;
	if (argc < 2 || strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
		usage(argc < 2 ? stderr : stdout);
		*rc = argc < 2 ? 2 : 0;
		return 0;
	}
	fprintf(stderr, "%s: unknown subcommand '%s' (", tool, sub);
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, "%s%s", i ? ", " : "", subs[i]);
	fprintf(stderr, ")\n");
	*rc = 2;
	return 0;
}

int
ax_api_cmd_parse(ax_api_cmd *cmd, int argc, char **argv,
                 const ax_api_flag *flags, int min_pos, int max_pos)
{
	int i = 1, only_pos = 0;

	while (i < argc) {
		const char        *a = argv[i], *v;
		const ax_api_flag *f;
		int                r;

		if (only_pos || a[0] != '-' || a[1] == '\0') {
			if (cmd->npos >= max_pos ||
			    cmd->npos >= AX_API_CMD_MAX_POS) {
				fprintf(stderr,
				        "%s: unexpected argument '%s'; run "
				        "`%s --help`\n",
				        cmd->prog, a, cmd->prog);
				return 2;
			}
			cmd->pos[cmd->npos++] = a;
			i++;
			continue;
		}
		if (strcmp(a, "--") == 0) {
			only_pos = 1;
			i++;
			continue;
		}
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
			return -1;
		r = ax_api_opts_parse(argc, argv, &i, &cmd->opts, cmd->prog);
		if (r < 0)
			return 2;
		if (r > 0)
			continue;
		if ((f = find_flag(flags, a, &v)) == NULL) {
			fprintf(stderr,
			        "%s: unknown option '%s'; run `%s --help`\n",
			        cmd->prog, a, cmd->prog);
			return 2;
		}
		i++;
		if (f->set != NULL) {
			*f->set = 1;
			continue;
		}
		if (v == NULL) {
			if (i >= argc) {
				fprintf(stderr, "%s: %s needs a value\n",
				        cmd->prog, f->name);
				return 2;
			}
			v = argv[i++];
		}
		if (f->value != NULL) {
			*f->value = v;
		} else if (*f->nmany >= f->cap) {
			fprintf(stderr, "%s: at most %d %s options\n",
			        cmd->prog, f->cap, f->name);
			return 2;
		} else {
			f->many[(*f->nmany)++] = v;
		}
	}
	if (cmd->npos < min_pos) {
		fprintf(stderr, "%s: missing argument; run `%s --help`\n",
		        cmd->prog, cmd->prog);
		return 2;
	}
	return 0;
}

int
ax_api_cmd_connect(ax_api_cmd *cmd)
{
	if (ax_api_client_new(&cmd->opts, &cmd->client) != AX_OK)
		return ax_api_cmd_fail(cmd);
	return 0;
}

void
ax_api_cmd_fini(ax_api_cmd *cmd)
{
	ax_api_client_free(cmd->client);
	cmd->client = NULL;
}

static int
parse_int(const ax_api_cmd *cmd, const char *what, const char *text,
          long long min, int64_t *out)
{
	char     *end;
	long long v;

	errno = 0;
	v     = strtoll(text, &end, 10);
	if (*text == '\0' || *end != '\0' || errno != 0 || v < min) {
		fprintf(stderr,
		        "%s: %s must be an integer >= %lld, got '%s'\n",
		        cmd->prog, what, min, text);
		return 2;
	}
	*out = v;
	return 0;
}

int
ax_api_cmd_id(const ax_api_cmd *cmd, const char *what, const char *text,
              int64_t *id)
{
	return parse_int(cmd, what, text, 1, id);
}

int
ax_api_cmd_count(const ax_api_cmd *cmd, const char *what, const char *text,
                 int64_t *n)
{
	return parse_int(cmd, what, text, 0, n);
}

void
ax_api_cmd_print_json(json_t *j)
{
	json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	fputc('\n', stdout);
}

int
ax_api_cmd_fail(const ax_api_cmd *cmd)
{
	return ax_api_fail(cmd->prog);
}
