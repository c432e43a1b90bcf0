/* test-interp-ops.c - symbolizer/interp/interp_ops.c: the table found by
 * kind and by file name, a session's Instances by kind, and the splice of
 * interpreter frames into a native stack (runs split after the frames
 * that end one, the root-most eval frame getting the root-most run, the
 * frames on top without an eval frame), with CPython's entry. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "cpython.h"
#include "interp_ops.h"

#define EVAL "_PyEval_EvalFrameDefault"
#define F(i) (INTERP_ORDER_FRAME | (i))

static struct interp_frame frame(uint64_t code, int entry)
{
	return (struct interp_frame){ .kind = SONDE_INTERP_CPYTHON, .n_words = 1,
				      .words = { SONDE_CPYTHON_FRAME(code, 0, entry) } };
}

static void test_table(void **state)
{
	const struct interp_ops *ops = interp_ops_of(SONDE_INTERP_CPYTHON);

	(void)state;
	assert_non_null(ops);
	assert_int_equal(ops->kind, SONDE_INTERP_CPYTHON);
	assert_string_equal(ops->splice_symbol, EVAL);
	assert_null(interp_ops_of(SONDE_INTERP_NONE));
	assert_null(interp_ops_of(SONDE_INTERP_KINDS));
	assert_ptr_equal(interp_ops_for_path("/usr/bin/python3.11"), ops);
	assert_ptr_equal(interp_ops_for_path("libpython3.13.so.1.0"), ops);
	assert_null(interp_ops_for_path("/usr/bin/ls"));
	assert_string_equal(interp_kind_name(SONDE_INTERP_CPYTHON), "cpython");
	assert_null(interp_kind_name(SONDE_INTERP_KINDS));
}

static void test_session(void **state)
{
	struct interp_session *s = interp_session_new();
	struct interp_frame f = frame(0x7f0000001000, 0);
	char name[64];

	(void)state;
	assert_non_null(s);
	assert_int_equal(interp_session_put_record(s, SONDE_INTERP_KINDS, 1, "x", 1), -ENOENT);
	assert_int_equal(interp_session_put_record(s, SONDE_INTERP_CPYTHON, 1, "x", 1), -EBADMSG);
	interp_session_frame_name(s, 1, &f, name, sizeof(name));
	assert_string_equal(name, "<unknown python frame>");
	interp_session_frame_name(NULL, 1, &f, name, sizeof(name));
	assert_string_equal(name, "<unknown python frame>");
	f.kind = SONDE_INTERP_KINDS;
	interp_session_frame_name(s, 1, &f, name, sizeof(name));
	assert_string_equal(name, "[unknown]");
	interp_session_free(s);
	interp_session_free(NULL);
}

static void test_splice(void **state)
{
	/* Leaf first, as in test_cpython_splice.py: a C function called from
	 * Python, called from C, called from Python. */
	const char *syms[] = { "PyNumber_Add", EVAL, "_PyFunction_Vectorcall", EVAL,
			       "Py_RunMain", NULL };
	struct interp_frame frames[7];
	const uint32_t want[] = { 5, 4, F(6), F(5), F(4), F(3), F(2), 2, F(1), F(0), 0 };
	const uint32_t on_top[] = { 2, 1, 0, F(1), F(0) };
	uint32_t order[16], n = 0;

	(void)state;
	for (int i = 0; i < 7; i++)
		frames[i] = frame(0x1000 * (i + 1), i == 1 || i == 6);
	interp_splice(syms, 6, frames, 7, order, &n);
	assert_int_equal(n, sizeof(want) / sizeof(want[0]));
	assert_memory_equal(order, want, sizeof(want));

	/* No eval frame (its symbol not found): the frames go on top. */
	n = 0;
	interp_splice(syms + 4, 2, frames, 2, order, &n);
	assert_int_equal(n, 4);
	n = 0;
	interp_splice((const char *[]){ "a", "b", "c" }, 3, frames, 2, order, &n);
	assert_int_equal(n, 5);
	assert_memory_equal(order, on_top, sizeof(on_top));

	/* No interpreter frames: the native ones as they are, root first. */
	n = 0;
	interp_splice(syms, 6, NULL, 0, order, &n);
	assert_int_equal(n, 6);
	assert_int_equal(order[0], 5);
	assert_int_equal(order[5], 0);
}

static bool jit_ends_run(const struct interp_frame *f)
{
	return f->words[1] == 1;
}

/* A JIT kind's frames: native position + 1 in word 0's top byte. */
static struct interp_frame jit_frame(uint32_t pos, uint64_t id, uint64_t word1)
{
	return (struct interp_frame){ .kind = SONDE_INTERP_V8, .n_words = 2,
				      .words = { SONDE_INTERP_JIT_WORD0(pos, id), word1 } };
}

static void test_splice_jit(void **state)
{
	const struct interp_ops jit = { .kind = SONDE_INTERP_V8, .jit = true,
					.frame_ends_run = jit_ends_run };
	const struct interp_ops jit_eval = { .kind = SONDE_INTERP_V8, .jit = true,
					     .splice_symbol = "eval",
					     .frame_ends_run = jit_ends_run };
	/* Leaf first: two JIT frames (0, 2), a native one between, main. */
	const char *syms[] = { NULL, "uv_run", NULL, "eval", "main" };
	/* Native 0 is one frame; native 2 is two (an inlined function). */
	struct interp_frame frames[] = { jit_frame(1, 0xa, 0), jit_frame(3, 0xb, 0),
					 jit_frame(3, 0xc, 0), jit_frame(0, 0xd, 1),
					 jit_frame(9, 0xe, 1) };
	/* Root first: main, eval, the two of native 2 (root-most: c), uv_run,
	 * the one of native 0; positionless frames (3, and 4's position past
	 * the stack) on top. */
	const uint32_t want[] = { 4, 3, F(2), F(1), 1, F(0), F(4), F(3) };
	/* With a splice symbol they go in its place, one run each: eval is
	 * the only one, so it gets both runs. */
	const uint32_t want_eval[] = { 4, F(4), F(3), F(2), F(1), 1, F(0) };
	uint32_t order[16], n = 0;

	(void)state;
	interp_splice_with(&jit, syms, 5, frames, 5, order, &n);
	assert_int_equal(n, sizeof(want) / sizeof(want[0]));
	assert_memory_equal(order, want, sizeof(want));
	n = 0;
	interp_splice_with(&jit_eval, syms, 5, frames, 5, order, &n);
	assert_int_equal(n, sizeof(want_eval) / sizeof(want_eval[0]));
	assert_memory_equal(order, want_eval, sizeof(want_eval));
	/* Positions are ignored for a kind that is not JIT: all on top. */
	n = 0;
	interp_splice_with(&(struct interp_ops){ .kind = SONDE_INTERP_V8,
						 .frame_ends_run = jit_ends_run },
			   syms, 5, frames, 5, order, &n);
	assert_int_equal(n, 10);
	assert_int_equal(order[0], 4);
	assert_int_equal(order[5], F(4));
	assert_int_equal(order[9], F(0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_session),
		cmocka_unit_test(test_splice),
		cmocka_unit_test(test_splice_jit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
