/* flamegraph.c - a self-contained HTML flame graph (no network, no CDN):
 * the stacks as one JSON tree plus a small renderer with zoom (click a
 * frame), search (highlights matches and shows their share) and a tooltip
 * with samples and percentage. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "command.h"
#include "parse.h"

/* A node of the merged call tree. Children are a singly linked list; the
 * tree is built once and written once, so lookups stay linear: a stack
 * has few distinct children per frame in practice, and the limit below
 * bounds the worst case. */
struct fg_node {
	const char *name; /* borrowed from the response */
	uint64_t value;
	struct fg_node *child, *next;
};

#define FG_MAX_NODES (4u << 20)

struct fg_tree {
	struct fg_node root;
	size_t n_nodes;
};

static struct fg_node *fg_child(struct fg_tree *t, struct fg_node *parent, const char *name)
{
	struct fg_node *c;

	for (c = parent->child; c; c = c->next)
		if (!strcmp(c->name, name))
			return c;
	if (t->n_nodes >= FG_MAX_NODES)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->name = name;
	c->next = parent->child;
	parent->child = c;
	t->n_nodes++;
	return c;
}

static void fg_free(struct fg_node *n)
{
	while (n) {
		struct fg_node *next = n->next;
		fg_free(n->child);
		free(n);
		n = next;
	}
}

/* Builds the tree: root "all", then the node when the stacks come from
 * several, then comm, then the frames root first. Returns 0, or
 * -ENOMEM/-E2BIG (the tree is then partial). */
static int fg_build(struct fg_tree *t, const Sonde__V1__FoldedResponse *folded)
{
	bool by_node = false;

	for (size_t i = 1; i < folded->n_stacks && !by_node; i++)
		by_node = strcmp(folded->stacks[i]->node, folded->stacks[0]->node) != 0;
	t->root.name = "all";
	for (size_t i = 0; i < folded->n_stacks; i++) {
		const Sonde__V1__FoldedStack *st = folded->stacks[i];
		struct fg_node *n = &t->root;

		n->value += st->count;
		if (by_node) {
			n = fg_child(t, n, *st->node ? st->node : "[unknown node]");
			if (!n)
				return t->n_nodes >= FG_MAX_NODES ? -E2BIG : -ENOMEM;
			n->value += st->count;
		}
		if (st->comm && *st->comm) {
			n = fg_child(t, n, st->comm);
			if (!n)
				return t->n_nodes >= FG_MAX_NODES ? -E2BIG : -ENOMEM;
			n->value += st->count;
		}
		for (size_t f = 0; f < st->n_frames; f++) {
			n = fg_child(t, n, st->frames[f]);
			if (!n)
				return t->n_nodes >= FG_MAX_NODES ? -E2BIG : -ENOMEM;
			n->value += st->count;
		}
	}
	return 0;
}

/* JSON string body: escapes quotes, backslashes, control characters and
 * '<' (so no frame name can close the <script> element). */
static void json_escaped(FILE *out, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20 || c == '<' || c == '>' || c == '&')
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
}

/* The symbolizer caps stacks at a few hundred frames; this bounds the
 * recursion below whatever a server sends. */
#define FG_MAX_DEPTH 2048

/* Format: [name, value, [children...]]. */
static void fg_write_json(FILE *out, const struct fg_node *n, unsigned depth)
{
	fputs("[\"", out);
	json_escaped(out, n->name);
	fprintf(out, "\",%llu,[", (unsigned long long)n->value);
	if (depth < FG_MAX_DEPTH) {
		for (const struct fg_node *c = n->child; c; c = c->next) {
			fg_write_json(out, c, depth + 1);
			if (c->next)
				fputc(',', out);
		}
	}
	fputs("]]", out);
}

extern const char flamegraph_template[];

/* Writes the template with @@TITLE@@ and @@DATA@@ filled in. */
static int fg_write_html(FILE *out, const struct fg_node *root, const char *title)
{
	const char *t = flamegraph_template, *mark;

	while ((mark = strstr(t, "@@"))) {
		fwrite(t, 1, (size_t)(mark - t), out);
		if (!strncmp(mark, "@@DATA@@", 8)) {
			fg_write_json(out, root, 0);
			t = mark + 8;
		} else if (!strncmp(mark, "@@TITLE@@", 9)) {
			json_escaped(out, title);
			t = mark + 9;
		} else {
			fputs("@@", out);
			t = mark + 2;
		}
	}
	fputs(t, out);
	return ferror(out) ? -EIO : 0;
}

struct fg_page {
	const struct fg_tree *tree;
	const char *title;
};

static int fill_html(FILE *f, const void *ctx)
{
	const struct fg_page *p = ctx;

	return fg_write_html(f, &p->tree->root, p->title);
}

const char *cli_flamegraph_title(uint32_t profile, const char *what)
{
	static char buf[128];
	static const char *const kinds[] = { "CPU (samples)", "off-CPU time (ns)",
					     "memory growth (bytes)" };

	snprintf(buf, sizeof(buf), "%s: %s", what, kinds[profile < 3 ? profile : 0]);
	return buf;
}

int cli_write_flamegraph_file(const char *path, const Sonde__V1__FoldedResponse *folded,
			      const char *title)
{
	struct fg_tree tree = { 0 };
	struct fg_page page = { &tree, title };
	int err;

	err = fg_build(&tree, folded);
	if (!err)
		err = cli_write_file_atomic(path, fill_html, &page);
	fg_free(tree.root.child);
	return err;
}

int cmd_flamegraph(int argc, char **argv)
{
	static const char help[] =
		"usage: sonde flamegraph [--since SECONDS] [--node NAME] [--pid PID] -o FILE.html\n"
		"                        [--type cpu|off-cpu|memory] [--symbolizer ADDR]\n"
		"Writes the stacks stored by a running symbolizer as one self-contained HTML\n"
		"flame graph (click to zoom, search, tooltips; no network needed to view it).\n";
	struct cli_query_opts o = { .q = SONDE__V1__PROFILE_QUERY__INIT };
	Sonde__V1__FoldedResponse *folded = NULL;
	int r, err;

	r = cli_parse_query_opts(argc, argv, help, &o);
	if (r)
		return r > 0 ? 0 : 2;
	if (!o.output) {
		fprintf(stderr, "sonde flamegraph: say where to write it: -o FILE.html\n");
		return 2;
	}
	if (command_call(o.symbolizer, "/sonde.v1.Symbols/Folded", &o.q.base,
			 &sonde__v1__folded_response__descriptor, COMMAND_RPC_TIMEOUT_MS, false,
			 (ProtobufCMessage **)&folded) < 0)
		return 1;
	err = cli_write_flamegraph_file(o.output, folded, cli_flamegraph_title(o.q.profile, "sonde"));
	if (err)
		fprintf(stderr, "sonde flamegraph: writing %s: %s\n", o.output, strerror(-err));
	rpc_message_free(&folded->base);
	return err ? 1 : 0;
}
