/* debuginfo_fetch.c - fetches separate debug files by GNU build ID from
 * debuginfod servers on one worker thread (see debuginfo_fetch.h).
 *
 * The debuginfod protocol is one GET per file, URL/buildid/HEX/debuginfo:
 * 200 with the file, 404 when the server has none. libcurl does the HTTP
 * and TLS; this file asks every server that is not taken for down at
 * once (one curl multi handle, kept for the worker's life so connections
 * are reused) and keeps the first whole answer. It runs here, off the rpc
 * loop: an analysis job that wants a debug file no local directory has
 * waits (analysis.c) while this thread asks the servers, and the loop
 * collects the answers on its timer.
 *
 * The sandbox allows no DNS and no file outside the cache and debug
 * directories, so what a request needs is gathered at start, before it:
 * each host name is resolved once (getaddrinfo) and handed to curl as its
 * addresses (CURLOPT_RESOLVE), and the CA bundle is read into memory
 * (CURLOPT_CAINFO_BLOB; curl's own CA file and directory are turned off).
 * Redirects are not followed (their target could need a name never
 * resolved), and no proxy from the environment is used. Certificates and
 * host names are always verified. The thread starts on the first request,
 * inside the sandbox, so it has the same Landlock domain and seccomp
 * filter as the rest (TCP connect to the servers' ports only: sandbox.c).
 *
 * Each request is bounded by curl's limits (the whole request, connect
 * included; CURLOPT_MAXFILESIZE for an announced size) and by this
 * file's: bytes past the size cap stop the transfer, and the loop gives
 * up at the deadline whatever curl does. Only a 200 answer is written, to
 * a temporary file renamed into place when whole; the caller checks the
 * build ID before using it (analysis.c). The cache is DIR/HEX/debuginfo,
 * with DIR/HEX/miss when every server said 404 (its age says when).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "clock.h"
#include "hmap.h"
#include "log.h"
#include "debuginfo_fetch.h"

#define MAX_BUILD_ID 64
#define MAX_URL 512
#define MAX_HOST 256

struct fetch_task {
	struct fetch_task *next;
	struct fileid id;
	uint8_t build_id[MAX_BUILD_ID];
	size_t build_id_len;
	char *path; /* result: malloc'd, or NULL */
	int err;    /* result: 0 or a negative errno */
};

struct server {
	char url[MAX_URL];           /* without a trailing '/' */
	struct curl_slist *resolve;  /* "HOST:PORT:ADDR,..." for a name; NULL for an address */
	uint16_t port;
	bool https;
	int64_t down_until_ms;       /* under mu: not asked before then */
};

/* One server's transfer of one request (worker thread). */
struct xfer {
	CURL *h;
	struct server *srv;
	int fd;          /* the temporary file, once a 200 answer has bytes */
	uint64_t bytes;  /* received, answer of any status */
	bool too_big, done;
	int err;         /* a local error (writing), or the result once done */
	char tmp[4400];
	char errbuf[CURL_ERROR_SIZE];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct fetch_task *todo, *todo_tail, *done, *running;
static size_t n_todo;
static bool enabled, started, stopping;
static pthread_t thread;
static bool configured, verbose;
static struct server servers[DEBUGINFO_FETCH_MAX_URLS];
static size_t n_servers;
static char *ca_bytes; /* the CA bundle, when a server is https */
static size_t ca_len;
static CURLM *multi;
static char cache_dir[4096];
static unsigned timeout_s;
static uint64_t max_size;
/* Worker thread only: when to sweep the cache directory next. */
static int64_t next_sweep_ms;
/* Loop thread only: build ID -> int64_t * (clock_now_ms when to try again). */
static struct hmap *failed;

/* ---- URLs and names (main thread, before the sandbox) ---- */

static bool url_part_present(CURLU *u, CURLUPart part)
{
	char *s = NULL;
	bool present = curl_url_get(u, part, &s, 0) == CURLUE_OK && s && *s;

	curl_free(s);
	return present;
}

/* A host name curl will look up as it is (no IDN conversion), or an
 * address literal. */
static bool host_ok(const char *h)
{
	if (!*h || strlen(h) >= MAX_HOST)
		return false;
	if (*h == '[')
		return true; /* curl checked the IPv6 literal */
	for (; *h; h++)
		if (!isalnum((unsigned char)*h) && *h != '-' && *h != '.' && *h != '_')
			return false;
	return true;
}

/* Parses url into its scheme (https or not), host (brackets kept for
 * IPv6) and port. Returns 0, -EINVAL or -ENOMEM. */
static int parse_url(const char *url, bool *ret_https, char *ret_host, uint16_t *ret_port)
{
	static const CURLUPart extra[] = { CURLUPART_USER, CURLUPART_PASSWORD, CURLUPART_OPTIONS,
					   CURLUPART_QUERY, CURLUPART_FRAGMENT };
	char *scheme = NULL, *host = NULL, *port = NULL, *end = NULL;
	CURLU *u;
	unsigned long p;
	int r = -EINVAL;

	if (strlen(url) >= MAX_URL - 64)
		return -EINVAL;
	u = curl_url();
	if (!u)
		return -ENOMEM;
	if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0))
		goto cleanup;
	for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++)
		if (url_part_present(u, extra[i]))
			goto cleanup;
	if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !host_ok(host) ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK)
		goto cleanup;
	errno = 0;
	p = strtoul(port, &end, 10);
	if (errno || *end || p == 0 || p > 65535)
		goto cleanup;
	*ret_https = strcmp(scheme, "https") == 0;
	strcpy(ret_host, host);
	*ret_port = (uint16_t)p;
	r = 0;
cleanup:
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
	return r;
}

int debuginfo_fetch_check_url(const char *url)
{
	char host[MAX_HOST];
	uint16_t port;
	bool https;
	int r = parse_url(url, &https, host, &port);

	return r < 0 ? r : port;
}

static bool is_address(const char *host)
{
	struct in6_addr a;

	return *host == '[' || inet_pton(AF_INET, host, &a) == 1;
}

/* Resolves host once and gives s the curl entry that sends every request
 * to its addresses ("HOST:PORT:A,[B],..."). Returns 0, -EHOSTUNREACH or
 * -ENOMEM. */
static int resolve(struct server *s, const char *host, char *list, size_t size)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	char seen[DEBUGINFO_FETCH_MAX_ADDRS][INET6_ADDRSTRLEN + 3];
	size_t len, n = 0;
	int r;

	r = getaddrinfo(host, NULL, &hints, &res);
	if (r != 0 || !res) {
		log_error("debuginfod: cannot resolve '%s': %s", host,
			  r == EAI_SYSTEM ? strerror(errno) : gai_strerror(r));
		return -EHOSTUNREACH;
	}
	len = (size_t)snprintf(list, size, "%s:%u:", host, (unsigned)s->port);
	for (struct addrinfo *a = res; a && n < DEBUGINFO_FETCH_MAX_ADDRS; a = a->ai_next) {
		char ip[INET6_ADDRSTRLEN + 3], one[INET6_ADDRSTRLEN];
		const void *addr = a->ai_family == AF_INET6
			? (const void *)&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr
			: (const void *)&((struct sockaddr_in *)a->ai_addr)->sin_addr;

		if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) ||
		    !inet_ntop(a->ai_family, addr, one, sizeof(one)))
			continue;
		bool dup = false;

		snprintf(ip, sizeof(ip), a->ai_family == AF_INET6 ? "[%s]" : "%s", one);
		for (size_t k = 0; k < n; k++)
			dup = dup || strcmp(seen[k], ip) == 0;
		if (dup)
			continue; /* the same address for another protocol */
		if (len + strlen(ip) + 2 >= size)
			break;
		len += (size_t)snprintf(list + len, size - len, "%s%s", n ? "," : "", ip);
		strcpy(seen[n++], ip);
	}
	freeaddrinfo(res);
	if (!n) {
		log_error("debuginfod: '%s' has no IPv4 or IPv6 address", host);
		return -EHOSTUNREACH;
	}
	s->resolve = curl_slist_append(NULL, list);
	return s->resolve ? 0 : -ENOMEM;
}

/* Reads the CA bundle whole, before the sandbox. */
static int read_ca(const char *path)
{
	struct stat st;
	ssize_t n;
	int fd, r = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		log_error_errno(r, "debuginfod: cannot open the CA file %s", path);
		return r;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    (uint64_t)st.st_size > DEBUGINFO_FETCH_MAX_CA) {
		log_error("debuginfod: the CA file %s is not a regular file of 1 byte to %u MiB", path,
			  DEBUGINFO_FETCH_MAX_CA >> 20);
		r = -EFBIG;
		goto cleanup;
	}
	ca_bytes = malloc((size_t)st.st_size + 1);
	if (!ca_bytes) {
		r = -ENOMEM;
		goto cleanup;
	}
	for (ca_len = 0; ca_len < (size_t)st.st_size; ca_len += (size_t)n) {
		n = read(fd, ca_bytes + ca_len, (size_t)st.st_size - ca_len);
		if (n <= 0)
			break;
	}
	ca_bytes[ca_len] = '\0';
	if (!strstr(ca_bytes, "-----BEGIN CERTIFICATE-----")) {
		log_error("debuginfod: the CA file %s holds no PEM certificate", path);
		r = -EBADMSG;
	}
cleanup:
	close(fd);
	if (r < 0) {
		free(ca_bytes);
		ca_bytes = NULL;
		ca_len = 0;
	}
	return r;
}

/* Adds url as the next server. Returns 0, 1 (left out: lenient and its
 * name does not resolve) or a negative errno. */
static int add_server(const char *url, bool lenient)
{
	struct server *s = &servers[n_servers];
	char host[MAX_HOST], list[MAX_HOST + 16 + DEBUGINFO_FETCH_MAX_ADDRS * (INET6_ADDRSTRLEN + 3)];
	size_t len;
	int r;

	memset(s, 0, sizeof(*s));
	r = parse_url(url, &s->https, host, &s->port);
	if (r < 0) {
		log_error("debuginfod: '%.200s' is not an http:// or https:// URL with a host", url);
		return r;
	}
	len = strlen(url);
	while (len && url[len - 1] == '/')
		len--;
	memcpy(s->url, url, len);
	s->url[len] = '\0';
	if (is_address(host)) {
		log_info("debuginfod: %s", s->url);
	} else {
		r = resolve(s, host, list, sizeof(list));
		if (r == -EHOSTUNREACH && lenient) {
			log_warn("debuginfod: leaving %s out", s->url);
			return 1;
		}
		if (r < 0)
			return r;
		/* list is "HOST:PORT:ADDRESSES" */
		log_info("debuginfod: %s (%s: resolved once, at start)", s->url,
			 strchr(list + strlen(host) + 1, ':') + 1);
	}
	n_servers++;
	return 0;
}

static void drop_servers(void)
{
	for (size_t i = 0; i < n_servers; i++)
		curl_slist_free_all(servers[i].resolve);
	n_servers = 0;
	free(ca_bytes);
	ca_bytes = NULL;
	ca_len = 0;
}

int debuginfo_fetch_configure(const struct debuginfo_fetch_opts *o)
{
	bool https = false;
	int r;

	if (!o->n_urls)
		return 0;
	if (o->n_urls > DEBUGINFO_FETCH_MAX_URLS || !o->cache_dir || !o->timeout_s || !o->max_size ||
	    configured)
		return -EINVAL;
	if (strlen(o->cache_dir) >= sizeof(cache_dir))
		return -ENAMETOOLONG;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return -ENOMEM;
	for (size_t i = 0; i < o->n_urls; i++) {
		r = add_server(o->urls[i], o->lenient);
		if (r < 0)
			goto fail;
	}
	for (size_t i = 0; i < n_servers; i++)
		https = https || servers[i].https;
	if (https) {
		r = read_ca(o->ca_file ? o->ca_file : DEBUGINFO_FETCH_SYSTEM_CA);
		if (r < 0)
			goto fail;
	}
	strcpy(cache_dir, o->cache_dir);
	timeout_s = o->timeout_s;
	max_size = o->max_size;
	verbose = o->verbose;
	configured = n_servers > 0;
	return (int)n_servers;
fail:
	drop_servers();
	return r;
}

size_t debuginfo_fetch_ports(uint16_t *ports, size_t max)
{
	size_t n = 0;

	for (; n < n_servers && n < max; n++)
		ports[n] = servers[n].port;
	return n;
}

int debuginfo_fetch_init(void)
{
	if (!configured)
		return 0;
	if (mkdir(cache_dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	failed = hmap_new();
	/* Before the sandbox: the handle's wake-up socket pair. */
	multi = curl_multi_init();
	if (!failed || !multi) {
		hmap_free(failed, NULL);
		failed = NULL;
		if (multi)
			curl_multi_cleanup(multi);
		multi = NULL;
		return -ENOMEM;
	}
	enabled = true;
	return 0;
}

bool debuginfo_fetch_enabled(void)
{
	return enabled;
}

/* ---- the cache directory (worker thread) ---- */

static bool hex_name(const char *s)
{
	size_t n = 0;

	for (; s[n]; n++)
		if (!isxdigit((unsigned char)s[n]) || isupper((unsigned char)s[n]))
			return false;
	return n >= 4 && n <= 2 * MAX_BUILD_ID && n % 2 == 0;
}

/* Removes what is old in one build ID's directory, then the directory if
 * that emptied it. */
static void sweep_entry(int dfd, const char *name, time_t now)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct dirent *e;
	DIR *d;

	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		struct stat st;
		time_t max_age = DEBUGINFO_FETCH_MAX_AGE_S;

		if (strcmp(e->d_name, "miss") == 0)
			max_age = DEBUGINFO_FETCH_MISS_S;
		else if (len > 4 && strcmp(e->d_name + len - 4, ".tmp") == 0)
			max_age = DEBUGINFO_FETCH_SWEEP_S; /* a download a crash left */
		if (e->d_name[0] == '.' || fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (!S_ISDIR(st.st_mode) && now - st.st_mtime > max_age)
			unlinkat(fd, e->d_name, 0);
	}
	closedir(d);
	unlinkat(dfd, name, AT_REMOVEDIR); /* fails while it holds a file */
}

static void sweep(void)
{
	time_t now = time(NULL);
	struct dirent *e;
	DIR *d = opendir(cache_dir);

	next_sweep_ms = clock_now_ms() + DEBUGINFO_FETCH_SWEEP_S * 1000LL;
	if (!d)
		return;
	while ((e = readdir(d)))
		if (hex_name(e->d_name))
			sweep_entry(dirfd(d), e->d_name, now);
	closedir(d);
}

/* Whether path is a fetched file to use (marked as used for the sweep). A
 * file that cannot be one (empty, too large) is removed. */
static bool cached(const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return false;
	if (!S_ISREG(st.st_mode) || st.st_size == 0 || (uint64_t)st.st_size > max_size) {
		unlink(path);
		return false;
	}
	utimensat(AT_FDCWD, path, NULL, 0);
	return true;
}

/* Whether every server said 404 for this build ID less than
 * DEBUGINFO_FETCH_MISS_S ago. */
static bool missed(const char *miss)
{
	struct stat st;

	if (stat(miss, &st) < 0)
		return false;
	if (time(NULL) - st.st_mtime < DEBUGINFO_FETCH_MISS_S)
		return true;
	unlink(miss);
	return false;
}

static void remember_miss(const char *miss)
{
	int fd = open(miss, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd >= 0)
		close(fd);
}

/* ---- requests (worker thread) ---- */

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * n;
	long code = 0;

	x->bytes += len;
	if (x->bytes > max_size) {
		x->too_big = true;
		return 0;
	}
	curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
	if (code != 200)
		return len; /* an error page: counted, not kept */
	if (x->fd < 0) {
		x->fd = open(x->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (x->fd < 0) {
			x->err = -errno;
			return 0;
		}
	}
	for (size_t off = 0; off < len;) {
		ssize_t w = write(x->fd, p + off, len - off);

		if (w < 0) {
			x->err = -errno;
			return 0;
		}
		off += (size_t)w;
	}
	return len;
}

static int xfer_start(struct xfer *x, struct server *s, const char *hex, const char *dir, size_t i)
{
	char url[MAX_URL + 2 * MAX_BUILD_ID + 32];
	CURL *h = curl_easy_init();

	x->srv = s;
	x->fd = -1;
	if (!h)
		return -ENOMEM;
	x->h = h;
	if (snprintf(url, sizeof(url), "%s/buildid/%s/debuginfo", s->url, hex) >= (int)sizeof(url) ||
	    snprintf(x->tmp, sizeof(x->tmp), "%s/debuginfo.%d.%zu.tmp", dir, (int)getpid(), i) >=
		    (int)sizeof(x->tmp))
		return -ENAMETOOLONG;
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_PROXY, "");
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_s * 1000L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_s * 1000L);
	curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)max_size);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "sonde-symbolizer/" SONDE_VERSION);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, x->errbuf);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_PRIVATE, x);
	curl_easy_setopt(h, CURLOPT_VERBOSE, verbose ? 1L : 0L);
	if (s->resolve)
		curl_easy_setopt(h, CURLOPT_RESOLVE, s->resolve);
	/* Only the bundle read at start: no CA file or directory is opened
	 * inside the sandbox. */
	curl_easy_setopt(h, CURLOPT_CAINFO, NULL);
	curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
	if (ca_bytes) {
		struct curl_blob blob = { .data = ca_bytes, .len = ca_len, .flags = CURL_BLOB_NOCOPY };

		curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
	}
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	curl_easy_setopt(h, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
	if (curl_multi_add_handle(multi, h) != CURLM_OK)
		return -ENOMEM;
	return 0;
}

/* What one finished transfer gave: 0 (a whole file), -ENOENT (404),
 * -EFBIG, a local error (writing), or the server's failure: -ETIMEDOUT,
 * -ECONNREFUSED, -EKEYREJECTED (TLS), -EPROTO (another status), -EIO. */
static int xfer_result(struct xfer *x, CURLcode rc)
{
	long code = 0;

	if (!x->errbuf[0] && rc != CURLE_OK)
		snprintf(x->errbuf, sizeof(x->errbuf), "%s", curl_easy_strerror(rc));
	if (x->too_big || rc == CURLE_FILESIZE_EXCEEDED)
		return -EFBIG;
	if (x->err)
		return x->err;
	switch (rc) {
	case CURLE_OK:
		break;
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
		return -ECONNREFUSED;
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
		return -EKEYREJECTED;
	default:
		return -EIO;
	}
	curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
	if (code == 404)
		return -ENOENT;
	if (code != 200) {
		snprintf(x->errbuf, sizeof(x->errbuf), "HTTP status %ld%s", code,
			 code / 100 == 3 ? " (redirects are not followed: give the URL it names)" : "");
		return -EPROTO;
	}
	return x->fd >= 0 ? 0 : -EPROTO;
}

static bool server_failure(int err)
{
	return err == -ETIMEDOUT || err == -ECONNREFUSED || err == -EKEYREJECTED ||
	       err == -EPROTO || err == -EIO;
}

static void xfer_done(struct xfer *x, CURLcode rc)
{
	x->done = true;
	x->err = xfer_result(x, rc);
	if (!server_failure(x->err))
		return;
	pthread_mutex_lock(&mu);
	x->srv->down_until_ms = clock_now_ms() + DEBUGINFO_FETCH_DOWN_S * 1000LL;
	pthread_mutex_unlock(&mu);
	log_warn("debuginfod: %s: %s; not asked again for %d s", x->srv->url,
		 x->errbuf[0] ? x->errbuf : strerror(-x->err), DEBUGINFO_FETCH_DOWN_S);
}

/* Runs the transfers until one gives a whole file (returns its index),
 * all ended (-1), or the deadline passed (the rest then -ETIMEDOUT). */
static int xfers_run(struct xfer *xs, size_t n, int64_t deadline)
{
	int still = (int)n;

	for (;;) {
		CURLMsg *m;
		int left;

		curl_multi_perform(multi, &still);
		while ((m = curl_multi_info_read(multi, &left))) {
			char *priv = NULL;
			struct xfer *x;

			if (m->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
			x = (struct xfer *)(void *)priv;
			xfer_done(x, m->data.result);
			if (x->err == 0)
				return (int)(x - xs);
		}
		if (!still)
			return -1;
		if (clock_now_ms() >= deadline)
			break;
		curl_multi_poll(multi, NULL, 0, 200, NULL);
	}
	for (size_t i = 0; i < n; i++)
		if (xs[i].h && !xs[i].done)
			xfer_done(&xs[i], CURLE_OPERATION_TIMEDOUT);
	return -1;
}

static void xfer_end(struct xfer *x, bool keep)
{
	if (x->h) {
		curl_multi_remove_handle(multi, x->h);
		curl_easy_cleanup(x->h);
	}
	if (x->fd >= 0) {
		close(x->fd);
		if (!keep)
			unlink(x->tmp);
	}
}

/* Asks every server not taken for down for one build ID; a whole answer
 * lands at path. Returns 0, -ENOENT (every server asked said so;
 * *ret_all_asked whether that was every server), -EHOSTDOWN (none asked),
 * or the first other error. */
static int ask_servers(const char *hex, const char *dir, const char *path, bool *ret_all_asked)
{
	int64_t now = clock_now_ms(), deadline = now + (int64_t)timeout_s * 1000 + 1000;
	struct xfer *xs = calloc(n_servers, sizeof(*xs));
	size_t n = 0;
	int r = -EHOSTDOWN, won;

	if (!xs)
		return -ENOMEM;
	*ret_all_asked = true;
	for (size_t i = 0; i < n_servers; i++) {
		bool down;

		pthread_mutex_lock(&mu);
		down = now < servers[i].down_until_ms;
		pthread_mutex_unlock(&mu);
		if (down) {
			*ret_all_asked = false;
			continue;
		}
		xs[n].fd = -1;
		r = xfer_start(&xs[n], &servers[i], hex, dir, n);
		n++;
		if (r < 0)
			goto cleanup;
	}
	if (!n)
		goto cleanup;
	won = xfers_run(xs, n, deadline);
	if (won >= 0) {
		close(xs[won].fd);
		xs[won].fd = -1;
		r = rename(xs[won].tmp, path) < 0 ? -errno : 0;
		if (r < 0)
			unlink(xs[won].tmp);
		goto cleanup;
	}
	r = -ENOENT;
	for (size_t i = 0; i < n; i++)
		if (xs[i].err != -ENOENT && (r == -ENOENT || xs[i].err == -EFBIG))
			r = xs[i].err;
cleanup:
	for (size_t i = 0; i < n; i++)
		xfer_end(&xs[i], false);
	free(xs);
	return r;
}

/* Whether every server is taken for down now. Under mu. */
static bool all_down(int64_t now)
{
	for (size_t i = 0; i < n_servers; i++)
		if (now >= servers[i].down_until_ms)
			return false;
	return true;
}

/* One request: the cache, else the servers. */
static void fetch_one(struct fetch_task *t)
{
	char hex[2 * MAX_BUILD_ID + 1], dir[sizeof(cache_dir) + sizeof(hex) + 1];
	char path[sizeof(dir) + 16], miss[sizeof(dir) + 16];
	bool all_asked, down;

	for (size_t i = 0; i < t->build_id_len; i++)
		snprintf(hex + 2 * i, 3, "%02x", t->build_id[i]);
	snprintf(dir, sizeof(dir), "%s/%s", cache_dir, hex);
	snprintf(path, sizeof(path), "%s/debuginfo", dir);
	snprintf(miss, sizeof(miss), "%s/miss", dir);
	if (cached(path))
		goto found;
	if (missed(miss)) {
		t->err = -ENOENT;
		return;
	}
	pthread_mutex_lock(&mu);
	down = all_down(clock_now_ms());
	pthread_mutex_unlock(&mu);
	if (down) {
		t->err = -EHOSTDOWN;
		return;
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		t->err = -errno;
		return;
	}
	t->err = ask_servers(hex, dir, path, &all_asked);
	if (t->err == -ENOENT && all_asked)
		remember_miss(miss);
	else if (t->err < 0)
		rmdir(dir); /* fails when it holds a miss: fine */
	if (t->err < 0)
		return;
found:
	t->path = strdup(path);
	if (!t->path)
		t->err = -ENOMEM;
}

static void *worker(void *arg)
{
	(void)arg;
	sweep();
	pthread_mutex_lock(&mu);
	for (;;) {
		struct fetch_task *t;

		while (!todo && !stopping)
			pthread_cond_wait(&cv, &mu);
		if (stopping)
			break;
		t = todo;
		todo = t->next;
		if (!todo)
			todo_tail = NULL;
		n_todo--;
		running = t;
		pthread_mutex_unlock(&mu);
		if (clock_now_ms() >= next_sweep_ms)
			sweep();
		fetch_one(t);
		pthread_mutex_lock(&mu);
		running = NULL;
		t->next = done;
		done = t;
	}
	pthread_mutex_unlock(&mu);
	return NULL;
}

/* ---- the loop thread ---- */

int debuginfo_fetch_submit(const struct fileid *id, const uint8_t *build_id,
			   size_t build_id_len)
{
	struct fetch_task *t;
	int64_t *retry_at;
	int r = 0;

	if (!enabled)
		return -ENODEV;
	if (!build_id_len || build_id_len > MAX_BUILD_ID)
		return -EINVAL;
	pthread_mutex_lock(&mu);
	r = all_down(clock_now_ms()) ? -EAGAIN : 0;
	pthread_mutex_unlock(&mu);
	if (r < 0)
		return r;
	retry_at = hmap_get(failed, build_id, build_id_len);
	if (retry_at) {
		if (clock_now_ms() < *retry_at)
			return -EAGAIN;
		free(hmap_remove(failed, build_id, build_id_len));
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->id = *id;
	memcpy(t->build_id, build_id, build_id_len);
	t->build_id_len = build_id_len;
	pthread_mutex_lock(&mu);
	if (n_todo >= DEBUGINFO_FETCH_MAX_QUEUED) {
		r = -E2BIG;
	} else if (!started) {
		r = -pthread_create(&thread, NULL, worker, NULL);
		started = r == 0;
	}
	if (r == 0) {
		if (todo_tail)
			todo_tail->next = t;
		else
			todo = t;
		todo_tail = t;
		n_todo++;
		pthread_cond_signal(&cv);
	}
	pthread_mutex_unlock(&mu);
	if (r < 0)
		free(t);
	return r;
}

bool debuginfo_fetch_busy(void)
{
	bool busy;

	if (!started)
		return false;
	pthread_mutex_lock(&mu);
	busy = todo || running || done;
	pthread_mutex_unlock(&mu);
	return busy;
}

static void remember_failure(const struct fetch_task *t)
{
	int64_t *at = malloc(sizeof(*at)), *old = NULL;

	if (!at)
		return;
	*at = clock_now_ms() + DEBUGINFO_FETCH_RETRY_S * 1000LL;
	if (hmap_put(failed, t->build_id, t->build_id_len, at, (void **)&old) < 0)
		free(at);
	free(old);
}

size_t debuginfo_fetch_collect(void (*fn)(void *ctx, const struct fileid *id, const char *path),
			       void *ctx)
{
	struct fetch_task *list;
	size_t n = 0;

	if (!started)
		return 0;
	pthread_mutex_lock(&mu);
	list = done;
	done = NULL;
	pthread_mutex_unlock(&mu);
	while (list) {
		struct fetch_task *t = list;

		list = t->next;
		if (t->err < 0) {
			log_debug("no debug file from debuginfod for a file: %s", strerror(-t->err));
			if (t->err != -EHOSTDOWN)
				remember_failure(t);
		}
		fn(ctx, &t->id, t->path);
		free(t->path);
		free(t);
		n++;
	}
	return n;
}

static void free_list(struct fetch_task *t)
{
	while (t) {
		struct fetch_task *next = t->next;

		free(t->path);
		free(t);
		t = next;
	}
}

void debuginfo_fetch_stop(void)
{
	if (started) {
		pthread_mutex_lock(&mu);
		stopping = true;
		pthread_cond_signal(&cv);
		pthread_mutex_unlock(&mu);
		pthread_join(thread, NULL);
		started = false;
	}
	free_list(todo);
	free_list(done);
	todo = todo_tail = done = NULL;
	n_todo = 0;
	if (multi)
		curl_multi_cleanup(multi);
	multi = NULL;
	drop_servers();
	hmap_free(failed, free);
	failed = NULL;
	enabled = false;
	configured = false;
}
