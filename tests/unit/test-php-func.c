/* test-php-func.c - symbolizer/interp/php/: function records laid out as
 * bpf/php.h's struct sonde_php_meta decode and name frames as PHP does
 * (methods, {main}, closures, eval, internal functions); damaged and
 * hostile records are refused or made harmless; the per-(pid, address)
 * table; the version from file names; the Loader on Debian's php8.2 finds
 * executor_globals where binutils do; the 8.2 layout passes the sensor's
 * limits; PHP frames replace execute_ex in the splice. */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "file_image.h"
#include "interp_kinds.h"
#include "interp_loader.h"
#include "interp_ops.h"
#include "interp_records.h"
#include "php.h"
#include "php_func.h"
#include "php_layout.h"

_Static_assert(sizeof(struct sonde_php_meta) == PHP_META_SIZE, "record size");
_Static_assert(offsetof(struct sonde_php_meta, name) == PHP_META_HEADER, "record header");

static struct sonde_php_meta meta(uint8_t type, const char *name, const char *cls,
				  const char *file, uint64_t addr)
{
	struct sonde_php_meta m;

	memset(&m, 0, sizeof(m));
	m.size = sizeof(m);
	m.version = SONDE_PHP_META_VERSION;
	m.type = type;
	m.func_addr = addr;
	m.checksum = addr ^ 0x55;
	m.line_start = 10;
	m.name_len = (uint16_t)strlen(name);
	m.class_len = (uint16_t)strlen(cls);
	m.file_len = (uint16_t)strlen(file);
	memcpy(m.name, name, m.name_len);
	memcpy(m.class_name, cls, m.class_len);
	memcpy(m.file, file, m.file_len);
	return m;
}

static void name_of(const struct sonde_php_meta *m, uint32_t line, char *buf, size_t len)
{
	struct php_func f;

	assert_int_equal(php_func_decode(m, sizeof(*m), &f), 0);
	php_func_frame_name(&f, line, buf, len);
}

static void test_names(void **state)
{
	struct sonde_php_meta m;
	char buf[512];

	(void)state;
	m = meta(2, "spin", "Worker", "/srv/app.php", 0x1000);
	name_of(&m, 14, buf, sizeof(buf));
	assert_string_equal(buf, "Worker::spin (/srv/app.php:14)");
	m = meta(2, "", "", "/srv/app.php", 0x1000);
	name_of(&m, 3, buf, sizeof(buf));
	assert_string_equal(buf, "{main} (/srv/app.php:3)");
	name_of(&m, 0, buf, sizeof(buf));
	assert_string_equal(buf, "{main} (/srv/app.php)");
	m = meta(2, "{closure}", "Worker", "/srv/app.php", 0x1000);
	name_of(&m, 7, buf, sizeof(buf));
	assert_string_equal(buf, "Worker::{closure} (/srv/app.php:7)");
	m = meta(4, "", "", "/srv/app.php(3) : eval()'d code", 0x1000);
	name_of(&m, 1, buf, sizeof(buf));
	assert_string_equal(buf, "{eval} (/srv/app.php(3) : eval()'d code:1)");
	m = meta(1, "crc32", "", "", 0x1000);
	name_of(&m, 0, buf, sizeof(buf));
	assert_string_equal(buf, "crc32");
	m = meta(1, "stop", "ExcimerProfiler", "", 0x1000);
	name_of(&m, 0, buf, sizeof(buf));
	assert_string_equal(buf, "ExcimerProfiler::stop");
	php_func_frame_name(NULL, 5, buf, sizeof(buf));
	assert_string_equal(buf, PHP_UNKNOWN_FRAME);
	/* A small buffer: cut, NUL-terminated. */
	m = meta(2, "spin", "Worker", "/srv/app.php", 0x1000);
	name_of(&m, 14, buf, 8);
	assert_string_equal(buf, "Worker:");
}

static void test_hostile(void **state)
{
	struct sonde_php_meta m = meta(2, "a;b\nc", "K\xff", "/x.php", 0x1000);
	struct php_func f;
	char buf[512];

	(void)state;
	name_of(&m, 1, buf, sizeof(buf));
	assert_string_equal(buf, "K?::a?b?c (/x.php:1)");
	/* Cut flags add "..." */
	m = meta(2, "long", "", "/x.php", 0x1000);
	m.flags = SONDE_PHP_META_NAME_CUT;
	name_of(&m, 1, buf, sizeof(buf));
	assert_string_equal(buf, "long... (/x.php:1)");
	/* Lengths, size, version, type. */
	m = meta(2, "f", "", "/x.php", 0x1000);
	m.name_len = PHP_META_NAME + 1;
	assert_int_equal(php_func_decode(&m, sizeof(m), &f), -EBADMSG);
	m = meta(2, "f", "", "/x.php", 0x1000);
	m.file_len = 0xffff;
	assert_int_equal(php_func_decode(&m, sizeof(m), &f), -EBADMSG);
	m = meta(2, "f", "", "/x.php", 0x1000);
	m.class_len = PHP_META_CLASS + 1;
	assert_int_equal(php_func_decode(&m, sizeof(m), &f), -EBADMSG);
	m = meta(3, "f", "", "/x.php", 0x1000);
	assert_int_equal(php_func_decode(&m, sizeof(m), &f), -EBADMSG);
	m = meta(1, "", "", "", 0x1000); /* an internal function has a name */
	assert_int_equal(php_func_decode(&m, sizeof(m), &f), -EBADMSG);
	m = meta(2, "f", "", "/x.php", 0x1000);
	m.version = 2;
	assert_int_equal(php_func_decode(&m, sizeof(m), &f), -EBADMSG);
	m = meta(2, "f", "", "/x.php", 0x1000);
	assert_int_equal(php_func_decode(&m, sizeof(m) - 1, &f), -EBADMSG);
	m.size = 0;
	assert_int_equal(php_func_decode(&m, sizeof(m), &f), -EBADMSG);
	assert_int_equal(php_func_decode(NULL, sizeof(m), &f), -EBADMSG);
	/* A name filling its slot without a NUL stays in bounds. */
	m = meta(2, "f", "", "/x.php", 0x1000);
	memset(m.name, 'n', sizeof(m.name));
	m.name_len = sizeof(m.name);
	assert_int_equal(php_func_decode(&m, sizeof(m), &f), 0);
	assert_int_equal(strlen(f.name), PHP_META_NAME);
}

static void test_table(void **state)
{
	struct interp_records *t = php_funcs_new();
	struct sonde_php_meta a = meta(2, "a", "", "/x.php", 0x1000);
	struct sonde_php_meta b = meta(2, "b", "", "/x.php", 0x1000);
	struct sonde_php_meta bad = a;

	(void)state;
	assert_non_null(t);
	assert_int_equal(interp_records_put(t, 7, &a, sizeof(a)), 0);
	assert_string_equal(php_funcs_get(t, 7, 0x1000, 0)->name, "a");
	assert_non_null(php_funcs_get(t, 7, 0x1000, 0x1000 ^ 0x55));
	assert_null(php_funcs_get(t, 7, 0x1000, 1)); /* another checksum */
	assert_null(php_funcs_get(t, 8, 0x1000, 0)); /* another process */
	assert_null(php_funcs_get(t, 7, 0x2000, 0));
	assert_int_equal(interp_records_put(t, 7, &b, sizeof(b)), 0); /* reused address */
	assert_string_equal(php_funcs_get(t, 7, 0x1000, 0)->name, "b");
	assert_int_equal(interp_records_count(t), 1);
	bad.version = 9;
	assert_int_equal(interp_records_put(t, 7, &bad, sizeof(bad)), -EBADMSG);
	assert_int_equal(interp_records_refused(t), 1);
	/* Bounded: past the maximum the table starts over. */
	for (uint64_t i = 0; i < PHP_FUNCS_MAX + 5; i++) {
		struct sonde_php_meta m = meta(2, "f", "", "/x.php", 0x10000 + i * 16);

		assert_int_equal(interp_records_put(t, 9, &m, sizeof(m)), 0);
	}
	assert_true(interp_records_count(t) <= PHP_FUNCS_MAX);
	interp_records_free(t);
	interp_records_free(NULL);
}

static void test_version_from_name(void **state)
{
	unsigned ma = 0, mi = 0;

	(void)state;
	assert_int_equal(php_version_from_name("/usr/bin/php8.2", &ma, &mi), 0);
	assert_int_equal(ma * 10 + mi, 82);
	assert_int_equal(php_version_from_name("/usr/sbin/php-fpm8.1", &ma, &mi), 0);
	assert_int_equal(ma * 10 + mi, 81);
	assert_int_equal(php_version_from_name("php-cgi8.3", &ma, &mi), 0);
	assert_int_equal(php_version_from_name("/usr/lib/libphp8.2.so", &ma, &mi), 0);
	assert_int_equal(php_version_from_name("/usr/bin/php", &ma, &mi), -ENOENT);
	assert_int_equal(php_version_from_name("/usr/bin/phpize8.2", &ma, &mi), -ENOENT);
	assert_int_equal(php_version_from_name("/usr/bin/php-config8.2", &ma, &mi), -ENOENT);
	assert_int_equal(php_version_from_name("/usr/bin/php8.2.bak", &ma, &mi), -ENOENT);
	assert_int_equal(php_version_from_name("/usr/bin/php8", &ma, &mi), -ENOENT);
	assert_int_equal(php_version_from_name("/usr/bin/python3.11", &ma, &mi), -ENOENT);
	assert_int_equal(php_version_from_name(NULL, &ma, &mi), -ENOENT);
	assert_non_null(php_layout_for(8, 2));
	assert_null(php_layout_for(8, 1));
	assert_null(php_layout_for(7, 4));
	/* The table entry: the runtime wants php8.2 and no python. */
	assert_non_null(interp_ops_for_path("/usr/bin/php8.2"));
	assert_int_equal(interp_ops_for_path("/usr/bin/php8.2")->kind, SONDE_INTERP_PHP);
	assert_string_equal(interp_kind_name(SONDE_INTERP_PHP), "php");
}

#define DEBIAN_PHP "/usr/bin/php8.2"

/* From cmd's output: field 0, the value of nm's symbol `want`; field 1,
 * vaddr - offset + 1 of readelf -lW's first LOAD line holding `want`.
 * 0: not found. */
static uint64_t popen_value(const char *cmd, const char *want, int field)
{
	char line[512];
	uint64_t ret = 0;
	FILE *f = popen(cmd, "r");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		uint64_t v[2];
		char name[256];

		if (field == 0 && sscanf(line, "%" SCNx64 " %*c %255s", &v[0], name) == 2 &&
		    !strcmp(name, want) && !ret)
			ret = v[0];
		if (field == 1 && strstr(line, want) &&
		    sscanf(line, " LOAD 0x%" SCNx64 " 0x%" SCNx64, &v[0], &v[1]) == 2 && !ret)
			ret = v[1] - v[0] + 1; /* vaddr - offset, + 1: found */
	}
	pclose(f);
	return ret;
}

static void test_loader_on_debian_php(void **state)
{
	struct file_image *img;
	struct interp_data d;
	const char *reason = NULL;
	uint64_t eg, delta;

	(void)state;
	if (access(DEBIAN_PHP, R_OK) < 0)
		skip();
	eg = popen_value("nm -D --defined-only " DEBIAN_PHP, "executor_globals", 0);
	delta = popen_value("readelf -lW " DEBIAN_PHP, " R E ", 1);
	assert_int_not_equal(eg, 0);
	assert_int_not_equal(delta, 0);
	img = file_image_open(DEBIAN_PHP);
	assert_non_null(img);
	assert_true(interp_loader_wants(DEBIAN_PHP));
	assert_int_equal(interp_loader_analyse(img, DEBIAN_PHP, &d, &reason), 0);
	assert_int_equal(d.kind, SONDE_INTERP_PHP);
	assert_int_equal(d.major * 10 + d.minor, 82);
	assert_int_equal(d.runtime_offset, eg - (delta - 1));
	/* The same bytes under another version's name: unsupported. */
	assert_int_equal(interp_loader_analyse(img, "/usr/bin/php8.3", &d, &reason),
			 -EPROTONOSUPPORT);
	assert_non_null(reason);
	file_image_free(img);
}

/* The 8.2 config passes its own limits table (as sensor/validate.c checks
 * it). */
static void test_config_in_limits(void **state)
{
	const struct sonde_interp_limits *lim = sonde_interp_limits_of(SONDE_INTERP_PHP);
	const struct interp_ops *ops = interp_ops_of(SONDE_INTERP_PHP);
	struct interp_data d = { .kind = SONDE_INTERP_PHP, .major = 8, .minor = 2 };
	struct interp_config c;

	(void)state;
	assert_non_null(lim);
	assert_int_equal(ops->config(&d, &c), 0);
	assert_int_equal(c.layout_len, lim->config_size);
	assert_int_equal(c.format_version, lim->format_version);
	for (uint32_t i = 0; i < lim->n_fields; i++) {
		const struct sonde_interp_field *f = &lim->fields[i];
		uint32_t v = f->size == 1 ? c.layout[f->offset]
					  : (uint32_t)(c.layout[f->offset] | c.layout[f->offset + 1] << 8);

		if (f->rule == SONDE_INTERP_BITS)
			assert_int_equal(v & ~f->max, 0);
		else
			assert_true(v >= f->min && v <= f->max);
	}
	d.minor = 1;
	assert_int_equal(ops->config(&d, &c), -EPROTONOSUPPORT);
}

/* A stack main -> ... -> execute_ex -> zif_array_map -> zend_call_function
 * -> execute_ex -> zif_crc32: the closure's run replaces the leaf-most
 * execute_ex, {main} -> array_map the root-most; crc32 stays in the leaf
 * run (an internal frame never ends one). */
static void test_splice(void **state)
{
	const char *syms[] = { "zif_crc32",  "execute_ex", "zend_call_function",
			       "zif_array_map", "execute_ex", "main" };
	struct interp_frame fr[4] = {
		{ SONDE_INTERP_PHP, 1, { SONDE_PHP_FRAME(0x10, 0, 0) } },   /* crc32 */
		{ SONDE_INTERP_PHP, 1, { SONDE_PHP_FRAME(0x20, 5, 1) } },   /* {closure}, TOP */
		{ SONDE_INTERP_PHP, 1, { SONDE_PHP_FRAME(0x30, 0, 0) } },   /* array_map */
		{ SONDE_INTERP_PHP, 1, { SONDE_PHP_FRAME(0x40, 9, 1) } },   /* {main}, TOP */
	};
	uint32_t order[16], n = 0;
	const uint32_t want[] = { 5,
				  INTERP_ORDER_FRAME | 3, INTERP_ORDER_FRAME | 2,
				  3, 2,
				  INTERP_ORDER_FRAME | 1, INTERP_ORDER_FRAME | 0,
				  0 };

	(void)state;
	interp_splice(syms, 6, fr, 4, order, &n);
	assert_int_equal(n, sizeof(want) / sizeof(want[0]));
	assert_memory_equal(order, want, sizeof(want));
	assert_int_equal(SONDE_PHP_FRAME_LINE(SONDE_PHP_FRAME(0x10, 70000, 0)), SONDE_PHP_LINE_MAX);
	assert_int_equal(SONDE_PHP_FRAME_FUNC(SONDE_PHP_FRAME(0x7fffffffffffull, 1, 1)),
			 0x7fffffffffffull);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_version_from_name),
		cmocka_unit_test(test_loader_on_debian_php),
		cmocka_unit_test(test_config_in_limits),
		cmocka_unit_test(test_splice),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
