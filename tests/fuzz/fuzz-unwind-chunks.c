/* fuzz-unwind-chunks.c - fuzzes what the sensor accepts from the
 * symbolizer: SymbolizerMessages, unpacked as rpc_message.c would, and the one
 * kind whose contents reach BPF maps, UnwindTable chunks, through the
 * sensor's real checks (sensor/unwind_maps.c) into fake maps that abort on
 * any write outside their size. The shape check before it mirrors
 * uplink.c's handle_unwind_table() (16-byte file ID). Processes come and
 * go between chunks, as they do while tables arrive.
 *
 * Input: records (u8 op, u16 LE length, bytes):
 *   0  a SymbolizerMessage
 *   1  a process: u32 pid, then (u64 start, u64 end, u64 offset, u8 file)
 *      per mapping, file naming one of 4 file IDs (even = registered)
 *   2  the process u32 pid exits
 *   3  a new connection (unfinished tables are dropped)
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ingest.pb-c.h"
#include "unwind_maps.h"

#define FUZZ_MAX_INPUT (1u << 20)
#define CAP_ROWS 4096u
#define CAP_INDEX UNWIND_INDEX_ENTRIES(CAP_ROWS)
#define MAX_MAPS 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fake {
	struct sonde_unwind_row rows[CAP_ROWS];
	uint32_t index[CAP_INDEX];
	size_t lpm_entries;
};

static int rows_write(void *ctx, uint32_t first, const struct sonde_unwind_row *rows, uint32_t n)
{
	struct fake *f = ctx;

	if (first > CAP_ROWS || n > CAP_ROWS - first)
		abort(); /* past the row array: the checks let a table overflow */
	memcpy(f->rows + first, rows, n * sizeof(*rows));
	return 0;
}

static int index_write(void *ctx, uint32_t first, const uint32_t *idx, uint32_t n)
{
	struct fake *f = ctx;

	if (first > CAP_INDEX || n > CAP_INDEX - first)
		abort(); /* past the page index the sensor sizes for its rows */
	memcpy(f->index + first, idx, n * sizeof(*idx));
	return 0;
}

static int lpm_update(void *ctx, const struct sonde_unwind_lpm_key *k,
		      const struct sonde_unwind_lpm_value *v)
{
	struct fake *f = ctx;

	if (k->prefixlen < 32 || k->prefixlen > 96)
		abort(); /* (pid, address) keys: 32 bits of pid + up to 64 of address */
	(void)v;
	f->lpm_entries++;
	return 0;
}

static int lpm_delete(void *ctx, const struct sonde_unwind_lpm_key *k)
{
	(void)ctx;
	(void)k;
	return 0;
}

static bool file_known(void *ctx, const uint8_t id[UNWIND_FILE_ID_LEN])
{
	(void)ctx;
	return id[0] % 2 == 0;
}

static const struct unwind_map_ops ops = {
	.rows_write = rows_write,
	.index_write = index_write,
	.lpm_update = lpm_update,
	.lpm_delete = lpm_delete,
	.file_known = file_known,
};

static void file_id_of(uint8_t which, uint8_t id[UNWIND_FILE_ID_LEN])
{
	memset(id, 0xa0 + which, UNWIND_FILE_ID_LEN);
	id[0] = which; /* even: registered */
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static void on_message(struct unwind_maps *um, const uint8_t *p, size_t len)
{
	Sonde__V1__SymbolizerMessage *m;
	const Sonde__V1__UnwindTable *t;
	struct unwind_chunk c = { 0 };

	m = (Sonde__V1__SymbolizerMessage *)protobuf_c_message_unpack(
		&sonde__v1__symbolizer_message__descriptor, NULL, len, p);
	if (!m)
		return;
	t = m->kind_case == SONDE__V1__SYMBOLIZER_MESSAGE__KIND_UNWIND_TABLE ? m->unwind_table : NULL;
	if (t && t->file_id.len == UNWIND_FILE_ID_LEN) {
		memcpy(c.file_id, t->file_id.data, UNWIND_FILE_ID_LEN);
		c.format_version = t->format_version;
		c.first = t->first;
		c.last = t->last;
		c.total_rows = t->total_rows;
		c.rows = t->rows.data;
		c.rows_len = t->rows.len;
		c.has_error = t->error && t->error[0];
		c.table_version = t->table_version;
		unwind_maps_add_chunk(um, &c);
	}
	protobuf_c_message_free_unpacked(&m->base, NULL);
}

static void on_process(struct unwind_maps *um, const uint8_t *p, size_t len)
{
	struct unwind_mapping maps[MAX_MAPS];
	size_t n = 0;
	uint32_t pid;

	if (len < 4)
		return;
	memcpy(&pid, p, 4);
	for (size_t off = 4; off + 25 <= len && n < MAX_MAPS; off += 25, n++) {
		maps[n].start = get_u64(p + off);
		maps[n].end = get_u64(p + off + 8);
		maps[n].offset = get_u64(p + off + 16);
		file_id_of(p[off + 24] % 4, maps[n].file_id);
	}
	unwind_maps_set_process(um, pid, maps, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fake *f;
	struct unwind_maps *um;
	struct unwind_maps_stats st;
	size_t pos = 0;

	if (size > FUZZ_MAX_INPUT)
		return 0;
	f = calloc(1, sizeof(*f));
	um = f ? unwind_maps_new(CAP_ROWS, &ops, f) : NULL;
	if (!um) {
		free(f);
		return 0;
	}
	while (size - pos >= 3) {
		uint8_t op = data[pos];
		size_t len = (size_t)data[pos + 1] | (size_t)data[pos + 2] << 8;
		const uint8_t *p = data + pos + 3;
		uint32_t pid;

		if (size - pos - 3 < len)
			break;
		pos += 3 + len;
		switch (op & 3) {
		case 0:
			on_message(um, p, len);
			break;
		case 1:
			on_process(um, p, len);
			break;
		case 2:
			if (len >= 4) {
				memcpy(&pid, p, 4);
				unwind_maps_remove_process(um, pid);
			}
			break;
		case 3:
			unwind_maps_connection_reset(um);
			break;
		}
	}
	unwind_maps_get_stats(um, &st);
	if (st.rows_loaded > CAP_ROWS)
		abort(); /* more rows loaded than the capacity */
	unwind_maps_free(um);
	free(f);
	return 0;
}
