/* hotspot_layout.c - the HotSpot walker's config from libjvm's tables
 * (hotspot_layout.h). */
#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hotspot_layout.h"
#include "hotspot_vmstructs.h"

enum {
	Q_VERSION, Q_LOW, Q_HIGH, Q_HEAPS,
	Q_GA_LEN, Q_GA_DATA, Q_HEAP_MEMORY, Q_HEAP_SEGMAP, Q_HEAP_LOG2, Q_VS_LOW, Q_VS_HIGH,
	Q_BLOB_NAME, Q_BLOB_FRAME_SIZE, Q_BLOB_FRAME_COMPLETE, Q_BLOB_CODE_BEGIN,
	Q_NM_METHOD, Q_NM_SCOPES_DATA, Q_NM_METADATA, Q_NM_SCOPES_PCS, Q_NM_DEPENDENCIES,
	Q_PCDESC_PC, Q_PCDESC_SCOPE, Q_PCDESC_SIZE, Q_METHOD_CONST, Q_CM_CONSTANTS, Q_CM_FLAGS, Q_CM_CODE_SIZE,
	Q_CM_NAME, Q_CM_SIG, Q_CP_HOLDER, Q_CP_SOURCE, Q_KLASS_NAME, Q_SYM_LENGTH, Q_SYM_BODY,
	Q_HEAPBLOCK_SIZE, Q_CM_SIZE, Q_CP_SIZE, Q_HAS_LINES, Q_LAST_SP, Q_SENDER_SP, Q_NM_COMPILE_ID,
	/* the same fields by another release's names (alternates below) */
	Q_GA_LEN_11, Q_CM_FLAGS_21, Q_HAS_LINES_21, Q_KLASS_SOURCE_11,
	N_Q
};

#define OFF(t, f) { HOTSPOT_VM_OFFSET, t, f, false, 0 }
#define ADDR(t, f) { HOTSPOT_VM_ADDRESS, t, f, false, 0 }
#define SIZE(t) { HOTSPOT_VM_SIZE, NULL, t, false, 0 }
#define INT(n) { HOTSPOT_VM_INT, NULL, n, false, 0 }

static const struct hotspot_vm_query queries[N_Q] = {
	[Q_VERSION] = ADDR("Abstract_VM_Version", "_vm_major_version"),
	[Q_LOW] = ADDR("CodeCache", "_low_bound"),
	[Q_HIGH] = ADDR("CodeCache", "_high_bound"),
	[Q_HEAPS] = ADDR("CodeCache", "_heaps"),
	[Q_GA_LEN] = OFF("GrowableArrayBase", "_len"),
	[Q_GA_DATA] = OFF("GrowableArray<int>", "_data"),
	[Q_HEAP_MEMORY] = OFF("CodeHeap", "_memory"),
	[Q_HEAP_SEGMAP] = OFF("CodeHeap", "_segmap"),
	[Q_HEAP_LOG2] = OFF("CodeHeap", "_log2_segment_size"),
	[Q_VS_LOW] = OFF("VirtualSpace", "_low"),
	[Q_VS_HIGH] = OFF("VirtualSpace", "_high"),
	[Q_BLOB_NAME] = OFF("CodeBlob", "_name"),
	[Q_BLOB_FRAME_SIZE] = OFF("CodeBlob", "_frame_size"),
	[Q_BLOB_FRAME_COMPLETE] = OFF("CodeBlob", "_frame_complete_offset"),
	[Q_BLOB_CODE_BEGIN] = OFF("CodeBlob", "_code_begin"),
	[Q_NM_METHOD] = OFF("CompiledMethod", "_method"),
	[Q_NM_SCOPES_DATA] = OFF("CompiledMethod", "_scopes_data_begin"),
	[Q_NM_METADATA] = OFF("nmethod", "_metadata_offset"),
	[Q_NM_SCOPES_PCS] = OFF("nmethod", "_scopes_pcs_offset"),
	[Q_NM_DEPENDENCIES] = OFF("nmethod", "_dependencies_offset"),
	[Q_PCDESC_PC] = OFF("PcDesc", "_pc_offset"),
	[Q_PCDESC_SCOPE] = OFF("PcDesc", "_scope_decode_offset"),
	[Q_PCDESC_SIZE] = SIZE("PcDesc"),
	[Q_METHOD_CONST] = OFF("Method", "_constMethod"),
	[Q_CM_CONSTANTS] = OFF("ConstMethod", "_constants"),
	[Q_CM_FLAGS] = OFF("ConstMethod", "_flags"),
	[Q_CM_CODE_SIZE] = OFF("ConstMethod", "_code_size"),
	[Q_CM_NAME] = OFF("ConstMethod", "_name_index"),
	[Q_CM_SIG] = OFF("ConstMethod", "_signature_index"),
	[Q_CP_HOLDER] = OFF("ConstantPool", "_pool_holder"),
	[Q_CP_SOURCE] = OFF("ConstantPool", "_source_file_name_index"),
	[Q_KLASS_NAME] = OFF("Klass", "_name"),
	[Q_SYM_LENGTH] = OFF("Symbol", "_length"),
	[Q_SYM_BODY] = OFF("Symbol", "_body"),
	[Q_HEAPBLOCK_SIZE] = SIZE("HeapBlock"),
	[Q_CM_SIZE] = SIZE("ConstMethod"),
	[Q_CP_SIZE] = SIZE("ConstantPool"),
	[Q_HAS_LINES] = INT("ConstMethod::_has_linenumber_table"),
	[Q_LAST_SP] = INT("frame::interpreter_frame_last_sp_offset"),
	[Q_SENDER_SP] = INT("frame::interpreter_frame_sender_sp_offset"),
	[Q_NM_COMPILE_ID] = OFF("nmethod", "_compile_id"),
	[Q_GA_LEN_11] = OFF("GenericGrowableArray", "_len"),
	[Q_CM_FLAGS_21] = OFF("ConstMethod", "_flags._flags"),
	[Q_HAS_LINES_21] = INT("ConstMethodFlags::_misc_has_linenumber_table"),
	[Q_KLASS_SOURCE_11] = OFF("InstanceKlass", "_source_file_name_index"),
};

/* Where a release names a field the walker needs otherwise, the answer to
 * the first query is taken from the second when the first has none:
 * JDK 11's GrowableArray base class is GenericGrowableArray; JDK 21 keeps
 * ConstMethod's flags in a ConstMethodFlags (a u4 whose bit constants are
 * its own). JDK 11's source file index is InstanceKlass's, not
 * ConstantPool's: pack() places it. Only these names, each checked on the
 * release that uses it: a name no table has is refused, never guessed. */
static const struct {
	int q, alt;
} alternates[] = {
	{ Q_GA_LEN, Q_GA_LEN_11 },
	{ Q_CM_FLAGS, Q_CM_FLAGS_21 },
	{ Q_HAS_LINES, Q_HAS_LINES_21 },
};

/* frame_x86.hpp: below last_sp come method, mirror, mdp, cache, locals,
 * bcp, one word each. */
#define METHOD_BELOW_LAST_SP 1
#define BCP_BELOW_LAST_SP 6

int hotspot_layout_need(const struct file_image *img, struct elf_need *need, const char **reason)
{
	return hotspot_vm_need(img, need, reason);
}

/* vaddr in the file-offset coordinates of the first executable load
 * segment (the sensor knows only executable mappings). */
static int exec_offset(const struct file_image *img, uint64_t vaddr, uint64_t *ret)
{
	static const char *const names[] = { ".text" };
	struct elf_layout *layout = malloc(sizeof(*layout));
	struct elf_need need = { 0 };
	struct elf_section text;
	int r = -EBADMSG;

	if (!layout)
		return -ENOMEM;
	if (elf_sections(img, &need, names, 1, &text, layout, NULL) < 0)
		goto out;
	for (size_t i = 0; i < layout->n_segments; i++) {
		const struct elf_segment *g = &layout->segments[i];

		if (g->type != PT_LOAD || !(g->flags & PF_X) || vaddr < g->vaddr)
			continue;
		*ret = vaddr - g->vaddr + g->offset;
		r = 0;
		break;
	}
out:
	free(layout);
	return r;
}

/* q's value into *ret if found and within [0, max]. */
static bool take(const struct hotspot_vm_query *q, int64_t max, unsigned *ret)
{
	if (!q->found || q->value < 0 || q->value > max)
		return false;
	*ret = (unsigned)q->value;
	return true;
}

/* The source file index's offset: the pool's, or the class's (JDK 11). */
static int pack_source(const struct hotspot_vm_query *q, struct hotspot_layout *l,
		       const char **reason)
{
	unsigned v;

	*reason = "a HotSpot offset or size out of bounds";
	if (q[Q_CP_SOURCE].found) {
		if (!take(&q[Q_CP_SOURCE], SONDE_HOTSPOT_FIELD_OFF_MAX - 1, &v))
			return -EPROTONOSUPPORT;
		l->off.cpool_source_index = (uint16_t)v;
		return 0;
	}
	if (q[Q_KLASS_SOURCE_11].found) {
		if (!take(&q[Q_KLASS_SOURCE_11], SONDE_HOTSPOT_FIELD_OFF_MAX - 1, &v))
			return -EPROTONOSUPPORT;
		l->off.cpool_source_index = (uint16_t)(SONDE_HOTSPOT_SOURCE_IN_KLASS + v);
		return 0;
	}
	*reason = "a field the walker needs is not in vmStructs";
	return -EPROTONOSUPPORT;
}

static int pack(const struct hotspot_vm_query *q, struct hotspot_layout *l, const char **reason)
{
	static const struct {
		int q;
		size_t at, size;
	} fields[] = {
#define F(qi, f) { qi, offsetof(struct sonde_hotspot_offsets, f), \
		   sizeof(((struct sonde_hotspot_offsets *)0)->f) }
		F(Q_GA_LEN, growable_len), F(Q_GA_DATA, growable_data),
		F(Q_HEAP_MEMORY, heap_memory), F(Q_HEAP_SEGMAP, heap_segmap),
		F(Q_HEAP_LOG2, heap_log2_segment), F(Q_VS_LOW, vs_low), F(Q_VS_HIGH, vs_high),
		F(Q_BLOB_NAME, blob_name), F(Q_BLOB_FRAME_SIZE, blob_frame_size),
		F(Q_BLOB_FRAME_COMPLETE, blob_frame_complete),
		F(Q_BLOB_CODE_BEGIN, blob_code_begin), F(Q_NM_METHOD, nmethod_method),
		F(Q_NM_SCOPES_DATA, nmethod_scopes_data), F(Q_NM_METADATA, nmethod_metadata),
		F(Q_NM_SCOPES_PCS, nmethod_scopes_pcs),
		F(Q_NM_DEPENDENCIES, nmethod_dependencies),
		F(Q_METHOD_CONST, method_const), F(Q_CM_CONSTANTS, cmethod_constants),
		F(Q_CM_FLAGS, cmethod_flags), F(Q_CM_CODE_SIZE, cmethod_code_size),
		F(Q_CM_NAME, cmethod_name_index), F(Q_CM_SIG, cmethod_sig_index),
		F(Q_CP_HOLDER, cpool_holder),
		F(Q_KLASS_NAME, klass_name), F(Q_SYM_LENGTH, symbol_length),
		F(Q_SYM_BODY, symbol_body), F(Q_HEAPBLOCK_SIZE, heapblock_size),
		F(Q_CM_SIZE, cmethod_size), F(Q_CP_SIZE, cpool_size),
		F(Q_HAS_LINES, cmethod_has_lines),
#undef F
	};
	uint8_t *p = (uint8_t *)&l->off;
	unsigned v;
	int r;

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		int64_t max = fields[i].size == 1 ? 0xff : SONDE_HOTSPOT_FIELD_OFF_MAX - 1;

		*reason = q[fields[i].q].found ? "a HotSpot offset or size out of bounds"
					       : "a field the walker needs is not in vmStructs";
		if (!take(&q[fields[i].q], max, &v))
			return -EPROTONOSUPPORT;
		p[fields[i].at] = (uint8_t)v;
		if (fields[i].size == 2)
			p[fields[i].at + 1] = (uint8_t)(v >> 8);
	}
	if ((r = pack_source(q, l, reason)) < 0)
		return r;
	*reason = "a PcDesc layout other than the walker's";
	if (!q[Q_PCDESC_PC].found || q[Q_PCDESC_PC].value != SONDE_HOTSPOT_PCDESC_PC ||
	    !q[Q_PCDESC_SCOPE].found || q[Q_PCDESC_SCOPE].value != SONDE_HOTSPOT_PCDESC_SCOPE ||
	    !q[Q_PCDESC_SIZE].found || q[Q_PCDESC_SIZE].value != SONDE_HOTSPOT_PCDESC_SIZE)
		return -EPROTONOSUPPORT;
	*reason = "no interpreter frame layout in vmStructs";
	if (!q[Q_LAST_SP].found || !q[Q_SENDER_SP].found || q[Q_LAST_SP].value > -1 ||
	    q[Q_LAST_SP].value < -8 || q[Q_SENDER_SP].value > -1 || q[Q_SENDER_SP].value < -8 ||
	    !q[Q_HAS_LINES].value)
		return -EPROTONOSUPPORT;
	l->off.frame_method_slot = (uint8_t)(-q[Q_LAST_SP].value + METHOD_BELOW_LAST_SP);
	l->off.frame_bcp_slot = (uint8_t)(-q[Q_LAST_SP].value + BCP_BELOW_LAST_SP);
	l->off.frame_sender_sp_slot = (uint8_t)-q[Q_SENDER_SP].value;
	/* Optional: without it the walker decodes every compiled frame's
	 * scopes at each sample instead of caching them. */
	if (q[Q_NM_COMPILE_ID].found && q[Q_NM_COMPILE_ID].value > 0 &&
	    q[Q_NM_COMPILE_ID].value % 4 == 0 &&
	    q[Q_NM_COMPILE_ID].value / 4 <= SONDE_HOTSPOT_COMPILE_ID4_MAX)
		l->off.nmethod_compile_id4 = (uint8_t)(q[Q_NM_COMPILE_ID].value / 4);
	return 0;
}

/* The CodeCache statics as distances from the lowest of them. */
static int statics(const struct hotspot_vm_query *q, uint64_t *ret_root, struct hotspot_layout *l,
		   const char **reason)
{
	const int idx[3] = { Q_LOW, Q_HIGH, Q_HEAPS };
	uint64_t root = UINT64_MAX;
	__u8 *out[3] = { &l->off.codecache_low_static, &l->off.codecache_high_static,
			 &l->off.codecache_heaps_static };

	*reason = "no CodeCache statics in vmStructs";
	for (int i = 0; i < 3; i++) {
		if (!q[idx[i]].found || q[idx[i]].value <= 0)
			return -EPROTONOSUPPORT;
		if ((uint64_t)q[idx[i]].value < root)
			root = (uint64_t)q[idx[i]].value;
	}
	*reason = "CodeCache statics too far apart";
	for (int i = 0; i < 3; i++) {
		uint64_t d = (uint64_t)q[idx[i]].value - root;

		if (d >= SONDE_HOTSPOT_STATIC_MAX)
			return -EPROTONOSUPPORT;
		*out[i] = (__u8)d;
	}
	*ret_root = root;
	return 0;
}

int hotspot_layout_read(const struct file_image *img, struct hotspot_layout *ret,
			const char **reason)
{
	struct hotspot_vm_query *q = malloc(sizeof(queries));
	struct hotspot_layout l = { 0 };
	uint64_t root = 0;
	int32_t major = 0;
	int r = -ENOMEM;

	*reason = "out of memory";
	if (!q)
		goto out;
	memcpy(q, queries, sizeof(queries));
	if ((r = hotspot_vm_read(img, q, N_Q, reason)) < 0)
		goto out;
	for (size_t i = 0; i < sizeof(alternates) / sizeof(alternates[0]); i++)
		if (!q[alternates[i].q].found)
			q[alternates[i].q] = q[alternates[i].alt];
	r = -EPROTONOSUPPORT;
	*reason = "no JDK release in the file";
	if (!q[Q_VERSION].found ||
	    hotspot_vm_read_static_int(img, (uint64_t)q[Q_VERSION].value, &major) < 0)
		goto out;
	*reason = "a JDK release other than 11 to 21";
	if (major < SONDE_HOTSPOT_MAJOR_MIN || major > SONDE_HOTSPOT_MAJOR_MAX)
		goto out;
	l.major = (unsigned)major;
	l.off.major = (uint8_t)major;
	if ((r = statics(q, &root, &l, reason)) < 0 || (r = pack(q, &l, reason)) < 0)
		goto out;
	r = exec_offset(img, root, &l.root_offset);
	*reason = "no executable load segment";
	if (r < 0)
		goto out;
	*ret = l;
	*reason = NULL;
	r = 0;
out:
	free(q);
	return r;
}
