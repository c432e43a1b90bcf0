/* minidebug.c - .gnu_debugdata decompression (see minidebug.h). The
 * stream comes from the analysed file, so both the output and liblzma's
 * memory are capped; a stream that would exceed either is refused. */
#include <errno.h>
#include <stdlib.h>

#include <lzma.h>

#include "minidebug.h"

int minidebug_decompress(const uint8_t *data, size_t len, uint8_t **ret, size_t *ret_len)
{
	lzma_stream s = LZMA_STREAM_INIT;
	uint8_t *out = NULL;
	size_t cap = 0;
	lzma_ret lr;
	int err;

	if (!data || len == 0)
		return -EBADMSG;
	if (lzma_stream_decoder(&s, MINIDEBUG_MEMLIMIT, 0) != LZMA_OK)
		return -ENOMEM;
	s.next_in = data;
	s.avail_in = len;
	for (;;) {
		if (s.avail_out == 0) {
			size_t ncap = cap ? cap * 2 : 1u << 20;
			uint8_t *p;

			if (cap >= MINIDEBUG_MAX_OUT) {
				err = -EBADMSG;
				goto fail;
			}
			if (ncap > MINIDEBUG_MAX_OUT)
				ncap = MINIDEBUG_MAX_OUT;
			p = realloc(out, ncap);
			if (!p) {
				err = -ENOMEM;
				goto fail;
			}
			out = p;
			s.next_out = out + cap;
			s.avail_out = ncap - cap;
			cap = ncap;
		}
		lr = lzma_code(&s, LZMA_FINISH);
		if (lr == LZMA_STREAM_END)
			break;
		if (lr != LZMA_OK) {
			err = lr == LZMA_MEM_ERROR ? -ENOMEM : -EBADMSG;
			goto fail;
		}
	}
	*ret_len = cap - s.avail_out;
	*ret = out;
	lzma_end(&s);
	return 0;
fail:
	lzma_end(&s);
	free(out);
	return err;
}
