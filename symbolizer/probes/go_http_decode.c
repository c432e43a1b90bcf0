/* go_http_decode.c - see go_http_decode.h. */
#include <errno.h>
#include <string.h>

#include "go_http_decode.h"
#include "utf8.h"

size_t go_http_text(char *dst, size_t cap, const uint8_t *src, size_t n)
{
	size_t o = 0, i = 0;

	while (i < n) {
		size_t k = utf8_char_len(src + i, n - i);

		if (k == 0 || (k == 1 && (src[i] < 0x20 || src[i] == 0x7f))) {
			if (o + 1 >= cap)
				break;
			dst[o++] = '?';
			i++;
			continue;
		}
		if (o + k >= cap)
			break;
		memcpy(dst + o, src + i, k);
		o += k;
		i += k;
	}
	dst[o] = '\0';
	return o;
}

/* A string field: n bytes of the array were copied, the target had len. */
static void field(char *dst, size_t cap, const char *arr, size_t arr_size, uint32_t len)
{
	size_t n = len < arr_size ? len : arr_size;
	size_t o = go_http_text(dst, cap - 3, (const uint8_t *)arr, n);

	if (len > arr_size)
		memcpy(dst + o, "...", 4);
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

int go_http_decode(const void *rec, size_t len, struct go_http_fields *out, const char **why)
{
	struct sonde_go_http_event e;

	*why = NULL;
	if (len != sizeof(e)) {
		*why = "record size is not that of a go_http event";
		return -EBADMSG;
	}
	memcpy(&e, rec, sizeof(e)); /* aligned copy */
	if (e.version != SONDE_GO_HTTP_RECORD_VERSION)
		*why = "unknown go_http record version";
	else if (e.kind != SONDE_GO_HTTP_SERVER && e.kind != SONDE_GO_HTTP_CLIENT)
		*why = "unknown go_http record kind";
	else if (e.end_ns < e.start_ns)
		*why = "go_http record ends before it starts";
	else if (all_zero(e.trace_id, 16) || all_zero(e.span_id, 8))
		*why = "go_http record without a trace or span ID";
	if (*why)
		return -EBADMSG;
	memset(out, 0, sizeof(*out));
	out->kind = e.kind;
	out->pid = e.pid;
	out->tid = e.tid;
	out->goroutine = e.goroutine;
	out->start_ns = e.start_ns;
	out->end_ns = e.end_ns;
	memcpy(out->trace_id, e.trace_id, 16);
	memcpy(out->span_id, e.span_id, 8);
	out->has_parent = (e.flags & SONDE_GO_HTTP_HAS_PARENT) && !all_zero(e.parent_span_id, 8);
	if (out->has_parent)
		memcpy(out->parent_span_id, e.parent_span_id, 8);
	out->sampled = e.flags & SONDE_GO_HTTP_SAMPLED;
	out->remote_parent = out->has_parent && (e.flags & SONDE_GO_HTTP_REMOTE_PARENT);
	/* HTTP status codes are three digits; anything else is unknown. */
	out->status_code = e.status_code >= 100 && e.status_code <= 999 ? e.status_code : 0;
	field(out->method, sizeof(out->method), e.method, sizeof(e.method), e.method_len);
	field(out->path, sizeof(out->path), e.path, sizeof(e.path), e.path_len);
	field(out->host, sizeof(out->host), e.host, sizeof(e.host), e.host_len);
	field(out->scheme, sizeof(out->scheme), e.scheme, sizeof(e.scheme), e.scheme_len);
	return 0;
}
