/* test-debuginfo-fetch.c - the debuginfod server list (core/debuginfo_fetch.c):
 * which URLs are taken, their ports, and what _configure refuses before
 * the sandbox (names that do not resolve, CA files without a
 * certificate). No request is made: tests/integration/test_debuginfod.py
 * runs real servers.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "debuginfo_fetch.h"

static void test_urls(void **state)
{
	static const struct {
		const char *url;
		int port;
	} cases[] = {
		{ "http://127.0.0.1:8002", 8002 },
		{ "http://192.0.2.7", 80 },
		{ "https://debuginfod.debian.net", 443 },
		{ "https://debuginfod.debian.net/", 443 },
		{ "https://debuginfod.example.org:8443/mirror/", 8443 },
		{ "http://[2001:db8::1]/x", 80 },
		{ "https://[::1]:9", 9 },
		{ "http://under_score.example", 80 },
		{ "ftp://127.0.0.1/", -EINVAL },
		{ "file:///usr/lib/debug", -EINVAL },
		{ "debuginfod.debian.net", -EINVAL },
		{ "http://user:pw@127.0.0.1/", -EINVAL },
		{ "http://user@127.0.0.1/", -EINVAL },
		{ "http://127.0.0.1/?q=1", -EINVAL },
		{ "http://127.0.0.1/#frag", -EINVAL },
		{ "http://127.0.0.1:0", -EINVAL },
		{ "http://127.0.0.1:65536", -EINVAL },
		{ "http://b\xc3\xa9.example/", -EINVAL }, /* IDN: curl would look up another name */
		{ "http://", -EINVAL },
		{ "", -EINVAL },
	};
	char long_url[600];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int r = debuginfo_fetch_check_url(cases[i].url);

		if (r != cases[i].port)
			fail_msg("%s: %d, want %d", cases[i].url, r, cases[i].port);
	}
	memset(long_url, 'a', sizeof(long_url) - 1);
	memcpy(long_url, "http://", 7);
	long_url[sizeof(long_url) - 1] = '\0';
	assert_int_equal(debuginfo_fetch_check_url(long_url), -EINVAL);
}

static char dir[64];

static int write_file(const char *name, const char *text, char *path, size_t size)
{
	FILE *f;

	snprintf(path, size, "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

static int configure(const char *const *urls, size_t n, bool lenient, const char *ca)
{
	char cache[128];
	struct debuginfo_fetch_opts o = {
		.urls = urls, .n_urls = n, .lenient = lenient, .cache_dir = cache,
		.ca_file = ca, .timeout_s = 1, .max_size = 1 << 20,
	};

	snprintf(cache, sizeof(cache), "%s/cache", dir);
	return debuginfo_fetch_configure(&o);
}

static void test_configure(void **state)
{
	static const char *const addrs[] = { "http://127.0.0.1:8002", "http://[::1]:8003/" };
	static const char *const names[] = { "https://no-such-host.invalid", "http://localhost:8004" };
	static const char *const one_https[] = { "https://127.0.0.1:8443" };
	char ca[128], empty[128];
	uint16_t ports[4];

	(void)state;
	assert_int_equal(configure(addrs, 2, false, NULL), 2);
	assert_int_equal(debuginfo_fetch_ports(ports, 4), 2);
	assert_int_equal(ports[0], 8002);
	assert_int_equal(ports[1], 8003);
	assert_int_equal(debuginfo_fetch_ports(ports, 1), 1);
	debuginfo_fetch_stop();

	/* A name that does not resolve: refused, or left out when lenient. */
	assert_int_equal(configure(names, 2, false, NULL), -EHOSTUNREACH);
	assert_int_equal(debuginfo_fetch_ports(ports, 4), 0);
	assert_int_equal(configure(names, 2, true, NULL), 1);
	assert_int_equal(debuginfo_fetch_ports(ports, 4), 1);
	assert_int_equal(ports[0], 8004);
	debuginfo_fetch_stop();
	assert_int_equal(configure(names, 1, true, NULL), 0);
	assert_false(debuginfo_fetch_enabled());
	debuginfo_fetch_stop();

	/* https: the CA file is read now, and must hold a certificate. */
	assert_int_equal(write_file("empty.pem", "no certificate here\n", empty, sizeof(empty)), 0);
	assert_int_equal(configure(one_https, 1, false, empty), -EBADMSG);
	snprintf(ca, sizeof(ca), "%s/missing.pem", dir);
	assert_int_equal(configure(one_https, 1, false, ca), -ENOENT);
	assert_int_equal(write_file("ca.pem",
				    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
				    ca, sizeof(ca)), 0);
	assert_int_equal(configure(one_https, 1, false, ca), 1);
	debuginfo_fetch_stop();
	/* Plain http reads no CA file at all. */
	assert_int_equal(configure(addrs, 1, false, empty), 1);
	debuginfo_fetch_stop();
	unlink(empty);
	unlink(ca);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_urls),
		cmocka_unit_test(test_configure),
	};
	int r;

	snprintf(dir, sizeof(dir), "/tmp/test-debuginfo-fetch.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	r = cmocka_run_group_tests(tests, NULL, NULL);
	rmdir(dir);
	return r;
}
