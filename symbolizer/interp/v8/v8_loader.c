/* v8_loader.c - V8's Loader (v8_loader.h). */
#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "v8_loader.h"

/* The constants read, by name; where each goes is set in v8_loader_analyse. */
enum v8c {
	C_SMI_SHIFT, C_HEAP_TAG, C_TAGGED_SIZE, C_FP_CONTEXT, C_FP_FUNCTION, C_FP_BYTECODE_ARRAY,
	C_FP_BYTECODE_OFFSET, C_MAP_TYPE, C_FN_SHARED, C_FN_FEEDBACK, C_SFI_NAME, C_SFI_SCRIPT,
	C_SCRIPT_NAME, C_STRING_LENGTH, C_SEQ_CHARS, C_THIN_ACTUAL, C_ISTREAM_START,
	C_SCOPE_FIRST_VARS, C_REP_MASK, C_SEQ_TAG, C_THIN_TAG, C_ONEBYTE_TAG, C_TYPE_SFI,
	C_TYPE_SCOPE_INFO, C_TYPE_SCRIPT, C_TYPE_BYTECODE_ARRAY, C_TYPE_CODE, C_FIRST_NONSTRING,
	C_CODE_TABLE, C_ARRAY_LENGTH, C_ARRAY_DATA, C_SCRIPT_SOURCE, C_BYTECODE_DATA, C_BLOB, C_BLOB_SIZE,
	/* Optional: without them optimised frames are not split into their
	 * inlined functions. */
	C_CODE_DEOPT, C_DEOPT_COUNT, C_DEOPT_LITERALS, C_DEOPT_INLINING, N_CONSTS
};

static const char *const const_names[N_CONSTS] = {
	[C_SMI_SHIFT] = "v8dbg_SmiShiftSize",
	[C_HEAP_TAG] = "v8dbg_HeapObjectTag",
	[C_TAGGED_SIZE] = "v8dbg_TaggedSize",
	[C_FP_CONTEXT] = "v8dbg_off_fp_context_or_frame_type",
	[C_FP_FUNCTION] = "v8dbg_off_fp_function",
	[C_FP_BYTECODE_ARRAY] = "v8dbg_off_fp_bytecode_array",
	[C_FP_BYTECODE_OFFSET] = "v8dbg_off_fp_bytecode_offset",
	[C_MAP_TYPE] = "v8dbg_class_Map__instance_type__uint16_t",
	[C_FN_SHARED] = "v8dbg_class_JSFunction__shared__SharedFunctionInfo",
	[C_FN_FEEDBACK] = "v8dbg_class_JSFunction__raw_feedback_cell__FeedbackCell",
	[C_SFI_NAME] = "v8dbg_class_SharedFunctionInfo__name_or_scope_info__Object",
	[C_SFI_SCRIPT] = "v8dbg_class_SharedFunctionInfo__script_or_debug_info__HeapObject",
	[C_SCRIPT_NAME] = "v8dbg_class_Script__name__Object",
	[C_STRING_LENGTH] = "v8dbg_class_String__length__int32_t",
	[C_SEQ_CHARS] = "v8dbg_class_SeqOneByteString__chars__char",
	[C_THIN_ACTUAL] = "v8dbg_class_ThinString__actual__String",
	[C_ISTREAM_START] = "v8dbg_class_InstructionStream__instruction_start__uintptr_t",
	[C_SCOPE_FIRST_VARS] = "v8dbg_scopeinfo_idx_first_vars",
	[C_REP_MASK] = "v8dbg_StringRepresentationMask",
	[C_SEQ_TAG] = "v8dbg_SeqStringTag",
	[C_THIN_TAG] = "v8dbg_ThinStringTag",
	[C_ONEBYTE_TAG] = "v8dbg_OneByteStringTag",
	[C_TYPE_SFI] = "v8dbg_type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE",
	[C_TYPE_SCOPE_INFO] = "v8dbg_type_ScopeInfo__SCOPE_INFO_TYPE",
	[C_TYPE_SCRIPT] = "v8dbg_type_Script__SCRIPT_TYPE",
	[C_TYPE_BYTECODE_ARRAY] = "v8dbg_type_BytecodeArray__BYTECODE_ARRAY_TYPE",
	[C_TYPE_CODE] = "v8dbg_type_Code__CODE_TYPE",
	[C_FIRST_NONSTRING] = "v8dbg_FirstNonstringType",
	[C_CODE_TABLE] = "v8dbg_class_Code__source_position_table__ByteArray",
	[C_ARRAY_LENGTH] = "v8dbg_class_FixedArrayBase__length__SMI",
	[C_ARRAY_DATA] = "v8dbg_class_FixedArray__data__uintptr_t",
	[C_SCRIPT_SOURCE] = "v8dbg_class_Script__source__Object",
	[C_BYTECODE_DATA] = "v8dbg_class_BytecodeArray__data__uintptr_t",
	[C_BLOB] = "v8_Default_embedded_blob_code_",
	[C_BLOB_SIZE] = "v8_Default_embedded_blob_code_size_",
	[C_CODE_DEOPT] = "v8dbg_class_Code__deoptimization_data__FixedArray",
	[C_DEOPT_COUNT] = "v8dbg_DeoptimizationDataInlinedFunctionCountIndex",
	[C_DEOPT_LITERALS] = "v8dbg_DeoptimizationDataLiteralArrayIndex",
	[C_DEOPT_INLINING] = "v8dbg_DeoptimizationDataInliningPositionsIndex",
};
#define FIRST_OPTIONAL C_CODE_DEOPT

/* V8's bytecode lengths (interpreter::Bytecodes::kBytecodeSizes): a
 * C++ symbol, not a v8dbg_ constant, found by its mangled name. */
static const char sizes_name[] = "_ZN2v88internal11interpreter9Bytecodes14kBytecodeSizesE";

/* Where each constant is: its symbol's address, or none; and the
 * bytecode lengths' address and size. */
struct v8_syms {
	bool found[N_CONSTS];
	uint64_t vaddr[N_CONSTS];
	bool sizes_found;
	uint64_t sizes_vaddr, sizes_size;
};

static const char *const section_names[] = { ".dynsym", ".dynstr", ".symtab", ".strtab" };
#define N_SECTIONS 4

/* Scans one symbol table for the constants' names (bounded by its size and
 * ELF_ANALYSIS_MAX_SYMBOLS); a name found earlier is kept. */
static void scan_table(const uint8_t *data, const struct elf_section *sym,
		       const struct elf_section *str, struct v8_syms *s)
{
	size_t n = sym->size / sizeof(Elf64_Sym);

	if (n > ELF_ANALYSIS_MAX_SYMBOLS)
		n = ELF_ANALYSIS_MAX_SYMBOLS;
	for (size_t i = 1; i < n; i++) {
		Elf64_Sym e;
		const char *name;
		size_t left;

		memcpy(&e, data + sym->offset + i * sizeof(e), sizeof(e));
		if (e.st_shndx == SHN_UNDEF || e.st_name >= str->size)
			continue;
		name = (const char *)data + str->offset + e.st_name;
		left = str->size - e.st_name;
		if (!s->sizes_found && left > sizeof(sizes_name) - 1 &&
		    !memcmp(name, sizes_name, sizeof(sizes_name))) {
			s->sizes_found = true;
			s->sizes_vaddr = e.st_value;
			s->sizes_size = e.st_size;
			continue;
		}
		if (left < 3 || name[0] != 'v' || name[1] != '8')
			continue;
		for (int c = 0; c < N_CONSTS; c++) {
			size_t len = strlen(const_names[c]);

			if (!s->found[c] && left > len && !memcmp(name, const_names[c], len + 1)) {
				s->found[c] = true;
				s->vaddr[c] = e.st_value;
				break;
			}
		}
	}
}

static bool section_ok(const struct file_image *img, const struct elf_section *s, uint32_t type)
{
	return s->found && s->type == type && file_image_has(img, s->offset, s->size);
}

/* The sections and layout; the constants' addresses when the tables are
 * there. 0, -EAGAIN (*need: the tables) or -EBADMSG. */
static int find_syms(const struct file_image *img, struct elf_need *need,
		     struct elf_layout *layout, struct v8_syms *s, const char **reason)
{
	struct elf_section secs[N_SECTIONS];
	int r = elf_sections(img, need, section_names, N_SECTIONS, secs, layout, reason);

	if (r < 0)
		return r == -EAGAIN ? -EAGAIN : -EBADMSG;
	memset(s, 0, sizeof(*s));
	for (int i = 0; i < N_SECTIONS; i += 2) {
		const struct elf_section *sym = &secs[i], *str = &secs[i + 1];

		if (!sym->found || !str->found)
			continue;
		if (!section_ok(img, sym, i ? SHT_SYMTAB : SHT_DYNSYM) ||
		    !section_ok(img, str, SHT_STRTAB)) {
			if (sym->type == (i ? SHT_SYMTAB : SHT_DYNSYM) && str->type == SHT_STRTAB) {
				elf_need_add(need, sym->offset, sym->size);
				elf_need_add(need, str->offset, str->size);
			}
			continue;
		}
		scan_table(file_image_data(img), sym, str, s);
	}
	return need->n ? -EAGAIN : 0;
}

/* The file offset of [vaddr, vaddr + 4) in a load segment's file bytes;
 * -1 when it is in none (zero-filled memory: .bss). */
static int64_t file_offset(const struct elf_layout *l, uint64_t vaddr)
{
	for (size_t i = 0; i < l->n_segments; i++) {
		const struct elf_segment *g = &l->segments[i];

		if (g->type == PT_LOAD && vaddr >= g->vaddr && vaddr - g->vaddr < g->filesz &&
		    g->filesz - (vaddr - g->vaddr) >= 4)
			return (int64_t)(g->offset + (vaddr - g->vaddr));
	}
	return -1;
}

int v8_loader_need(const struct file_image *img, struct elf_need *need)
{
	struct elf_layout *l = malloc(sizeof(*l));
	struct v8_syms s;
	const char *why;
	int r;

	if (!l)
		return 0; /* analyse says so */
	r = find_syms(img, need, l, &s, &why);
	if (r == 0) {
		for (int c = 0; c < N_CONSTS; c++) {
			int64_t off = s.found[c] && c != C_BLOB ? file_offset(l, s.vaddr[c]) : -1;

			if (off >= 0 && !file_image_has(img, (uint64_t)off, 4))
				elf_need_add(need, (uint64_t)off, 4);
		}
		r = need->n ? -EAGAIN : 0;
	}
	free(l);
	return r == -EBADMSG ? -EBADMSG : r;
}

/* Constant c's value: its 4 bytes in the file (0 for zero-filled memory),
 * sign-extended. False when not found or not fetched. */
static bool value_of(const struct file_image *img, const struct elf_layout *l,
		     const struct v8_syms *s, int c, int64_t *ret)
{
	const uint8_t *p;
	int64_t off;

	if (!s->found[c])
		return false;
	off = file_offset(l, s->vaddr[c]);
	if (off < 0) {
		*ret = 0;
		return true;
	}
	if (!file_image_has(img, (uint64_t)off, 4))
		return false;
	p = file_image_data(img) + off;
	*ret = (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			 (uint32_t)p[3] << 24);
	return true;
}

/* v into *dst when lo <= v <= hi. */
static bool put8(uint8_t *dst, int64_t v, int64_t lo, int64_t hi)
{
	if (v < lo || v > hi)
		return false;
	*dst = (uint8_t)v;
	return true;
}

static bool put16(uint16_t *dst, int64_t v, int64_t lo, int64_t hi)
{
	if (v < lo || v > hi)
		return false;
	*dst = (uint16_t)v;
	return true;
}

/* The config from the constants' values v[]; false when one is out of
 * the sensor's bounds (bpf/v8.h). */
static bool make_config(const int64_t *v, struct sonde_v8_offsets *o)
{
	memset(o, 0, sizeof(*o));
	/* 11.x (the InstructionStream split) keeps a Code's instruction
	 * start 8 bytes after its instruction stream pointer, which follows
	 * the source position table, and its size two words later; the
	 * JSFunction's code slot follows its feedback cell; a BytecodeArray
	 * has its constant pool, handler table and source position table
	 * after its length. */
	o->blob_size = (uint32_t)v[C_BLOB_SIZE];
	o->bytecode_table = 32;
	o->code_start = 40;
	o->code_size = 56;
	/* ScopeFlags of V8 10-11: function_variable at bits 12-13,
	 * has_saved_class_variable at bit 10; context local names inline up
	 * to 75 (kScopeInfoMaxInlinedLocalNamesSize). */
	o->scope_fv_shift = 12;
	o->scope_saved_class_bit = 10;
	o->scope_max_inlined = 75;
	o->major = 11;
	/* The inlining data: all four constants, inside the sensor's bounds,
	 * or none (0: optimised frames stay whole). */
	if (v[C_CODE_DEOPT] >= 8 && v[C_CODE_DEOPT] <= 255 && v[C_DEOPT_COUNT] >= 0 &&
	    v[C_DEOPT_COUNT] <= 31 && v[C_DEOPT_LITERALS] >= 0 && v[C_DEOPT_LITERALS] <= 31 &&
	    v[C_DEOPT_INLINING] >= 0 && v[C_DEOPT_INLINING] <= 31) {
		o->code_deopt = (uint8_t)v[C_CODE_DEOPT];
		o->deopt_count = (uint8_t)v[C_DEOPT_COUNT];
		o->deopt_literals = (uint8_t)v[C_DEOPT_LITERALS];
		o->deopt_inlining = (uint8_t)v[C_DEOPT_INLINING];
	}
	return v[C_BLOB_SIZE] > 0 && v[C_BLOB_SIZE] <= SONDE_V8_BLOB_MAX &&
	       put8(&o->code_table, v[C_CODE_TABLE], 0, 255) &&
	       put8(&o->array_length, v[C_ARRAY_LENGTH], 0, 255) &&
	       put8(&o->array_data, v[C_ARRAY_DATA], 0, 255) &&
	       put8(&o->script_source, v[C_SCRIPT_SOURCE], 0, 255) &&
	       put8(&o->bytecode_data, v[C_BYTECODE_DATA], 1, 255) &&
	       put8(&o->fp_context, -v[C_FP_CONTEXT], 8, 127) &&
	       put8(&o->fp_function, -v[C_FP_FUNCTION], 8, 127) &&
	       put8(&o->fp_bytecode_array, -v[C_FP_BYTECODE_ARRAY], 8, 127) &&
	       put8(&o->fp_bytecode_offset, -v[C_FP_BYTECODE_OFFSET], 8, 127) &&
	       put8(&o->map_instance_type, v[C_MAP_TYPE], 0, 255) &&
	       put8(&o->fn_shared, v[C_FN_SHARED], 0, 255) &&
	       put8(&o->fn_code, v[C_FN_FEEDBACK] + 8, 0, 255) &&
	       put8(&o->sfi_name, v[C_SFI_NAME], 0, 255) &&
	       put8(&o->sfi_script, v[C_SFI_SCRIPT], 0, 255) &&
	       put8(&o->script_name, v[C_SCRIPT_NAME], 0, 255) &&
	       put8(&o->string_length, v[C_STRING_LENGTH], 0, 255) &&
	       put8(&o->seq_chars, v[C_SEQ_CHARS], 0, 255) &&
	       put8(&o->thin_actual, v[C_THIN_ACTUAL], 0, 255) &&
	       put8(&o->scope_first_slot, 8 * (1 + v[C_SCOPE_FIRST_VARS]), 24, 255) &&
	       put8(&o->string_rep_mask, v[C_REP_MASK], 0, 15) &&
	       put8(&o->string_seq_tag, v[C_SEQ_TAG], 0, 15) &&
	       put8(&o->string_thin_tag, v[C_THIN_TAG], 0, 15) &&
	       put8(&o->string_onebyte, v[C_ONEBYTE_TAG], 1, 255) &&
	       put16(&o->type_sfi, v[C_TYPE_SFI], 1, 4095) &&
	       put16(&o->type_scope_info, v[C_TYPE_SCOPE_INFO], 1, 4095) &&
	       put16(&o->type_script, v[C_TYPE_SCRIPT], 1, 4095) &&
	       put16(&o->type_bytecode_array, v[C_TYPE_BYTECODE_ARRAY], 1, 4095) &&
	       put16(&o->type_code, v[C_TYPE_CODE], 1, 4095) &&
	       put16(&o->first_nonstring, v[C_FIRST_NONSTRING], 1, 4095);
}

/* The bytecode lengths' offset from the embedded builtins (blob, their
 * address) and count into o, when the symbol is a whole number of
 * tables of a plausible count, after the builtins and with the bytes
 * BPF copies (SONDE_V8_SIZES_MAX) in the file's bytes of a load segment
 * (the sensor checks them inside the image); else both stay 0 and
 * baseline frames have no line. */
static void find_sizes(const struct file_image *img, const struct elf_layout *l,
		       const struct v8_syms *s, uint64_t blob, struct sonde_v8_offsets *o)
{
	uint64_t n = s->sizes_size / 3, v = s->sizes_vaddr;

	if (!s->sizes_found || s->sizes_size % 3 || n < 4 || n > 255 || v <= blob ||
	    v - blob > SONDE_V8_SIZES_OFF_MAX)
		return;
	for (size_t i = 0; i < l->n_segments; i++) {
		const struct elf_segment *g = &l->segments[i];

		if (g->type == PT_LOAD && v >= g->vaddr && v - g->vaddr < g->filesz &&
		    g->filesz - (v - g->vaddr) >= SONDE_V8_SIZES_MAX &&
		    g->offset + (v - g->vaddr) + SONDE_V8_SIZES_MAX <= file_image_size(img)) {
			o->bytecode_sizes = (uint32_t)(v - blob);
			o->n_bytecodes = (uint8_t)n;
			return;
		}
	}
}

int v8_loader_analyse(const struct file_image *img, struct interp_data *ret, const char **reason)
{
	struct elf_layout *l = malloc(sizeof(*l));
	struct elf_need need = { 0 };
	struct sonde_v8_offsets o;
	struct v8_syms s;
	int64_t v[N_CONSTS];
	int r;

	*reason = "out of memory";
	if (!l)
		return -ENOMEM;
	r = find_syms(img, &need, l, &s, reason);
	if (r < 0) {
		*reason = r == -EAGAIN ? "symbol tables not fetched" : *reason ? *reason : "bad ELF";
		r = -EBADMSG;
		goto out;
	}
	r = -EPROTONOSUPPORT;
	*reason = "not a little-endian x86-64 ELF file";
	if (!l->is64 || !l->little_endian || l->machine != EM_X86_64)
		goto out;
	r = -ENOENT;
	*reason = "no V8 post-mortem constants (v8dbg_*)";
	if (!s.found[C_SMI_SHIFT])
		goto out;
	r = -EPROTONOSUPPORT;
	*reason = "a V8 post-mortem constant missing or not fetched";
	for (int c = 0; c < N_CONSTS; c++) {
		if (c == C_BLOB)
			continue;
		if (c >= FIRST_OPTIONAL) {
			if (!value_of(img, l, &s, c, &v[c]))
				v[c] = -1;
			continue;
		}
		if (!value_of(img, l, &s, c, &v[c])) {
			if (c == C_BLOB_SIZE)
				*reason = "no embedded builtins symbols (.symtab stripped?)";
			goto out;
		}
	}
	*reason = "V8 with pointer compression or 32-bit Smis (not walked yet)";
	if (v[C_SMI_SHIFT] != 31 || v[C_TAGGED_SIZE] != 8 || v[C_HEAP_TAG] != 1)
		goto out;
	*reason = "no embedded builtins symbols (.symtab stripped?)";
	if (!s.found[C_BLOB])
		goto out;
	*reason = "V8 constants outside the walker's bounds";
	if (!make_config(v, &o))
		goto out;
	/* The embedded code's start, in the executable segment's file
	 * coordinates (interp_data.runtime_offset). */
	r = -EBADMSG;
	*reason = "the embedded builtins are not in an executable load segment";
	for (size_t i = 0; i < l->n_segments; i++) {
		const struct elf_segment *g = &l->segments[i];

		if (g->type != PT_LOAD || !(g->flags & PF_X) || s.vaddr[C_BLOB] < g->vaddr ||
		    s.vaddr[C_BLOB] - g->vaddr >= g->filesz)
			continue;
		find_sizes(img, l, &s, s.vaddr[C_BLOB], &o);
		memset(ret, 0, sizeof(*ret));
		ret->kind = SONDE_INTERP_V8;
		ret->major = o.major;
		ret->minor = o.minor;
		ret->runtime_offset = s.vaddr[C_BLOB] - g->vaddr + g->offset;
		memcpy(ret->data, &o, sizeof(o));
		ret->data_len = sizeof(o);
		*reason = NULL;
		r = 0;
		break;
	}
out:
	free(l);
	return r;
}

bool v8_loader_wants(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return !strcmp(base, "node") || !strncmp(base, "libnode.so", 10);
}
