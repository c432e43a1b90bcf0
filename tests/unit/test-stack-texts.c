/* test-stack-texts.c - shared symbolized stacks: equal content is one
 * entry, a hash collision stays apart, references free the entry at the
 * last, and entries outlive their table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "stack_texts.h"

static void test_shared(void **state)
{
	struct stack_texts *t = stack_texts_new();
	const uint8_t raw[] = { 1, 2, 3 };
	const struct stack_text *a, *b, *c, *d;
	size_t n, bytes;

	assert_non_null(t);
	a = stack_texts_get(t, "main;f", 6, raw, sizeof(raw), 42);
	b = stack_texts_get(t, "main;f", 6, raw, sizeof(raw), 42);
	assert_non_null(a);
	assert_ptr_equal(a, b);
	assert_string_equal(a->text, "main;f");
	assert_memory_equal(a->raw, raw, sizeof(raw));
	/* Same hash, other content: its own entry, not in the table. */
	c = stack_texts_get(t, "main;g", 6, raw, sizeof(raw), 42);
	assert_non_null(c);
	assert_ptr_not_equal(a, c);
	assert_string_equal(c->text, "main;g");
	/* No raw stack. */
	d = stack_texts_get(t, "x", 1, NULL, 0, 7);
	assert_non_null(d);
	assert_null(d->raw);
	stack_texts_stats(t, &n, &bytes);
	assert_int_equal(n, 2);
	assert_int_equal(bytes, 6 + 3 + 1);
	stack_text_unref(b);
	stack_text_unref(c);
	stack_texts_stats(t, &n, &bytes);
	assert_int_equal(n, 2);
	stack_text_unref(a); /* the last: gone from the table */
	stack_texts_stats(t, &n, &bytes);
	assert_int_equal(n, 1);
	a = stack_texts_get(t, "main;f", 6, raw, sizeof(raw), 42);
	stack_text_ref(a);
	stack_texts_free(t); /* a and d outlive it */
	assert_string_equal(a->text, "main;f");
	stack_text_unref(a);
	stack_text_unref(a);
	stack_text_unref(d);
	stack_text_unref(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shared),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
