/* test-validate.c - sensor/validate.c: what the sensor accepts from the
 * symbolizer. A good ProbePlan and InterpreterConfig pass; each bound
 * (names from the probe objects' catalog, counts, const values, attach
 * offsets against executable mappings) refuses what is one past it. The
 * InterpreterConfig checks are one table, config_cases: a real config per
 * kind, and rows that change a field, the runtime offset, the header or
 * the file's size, each with the result the sensor must give; and every
 * byte of each kind's config is in its limits table exactly once. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "cpython.h"
#include "hotspot.h"
#include "interp_kinds.h"
#include "php.h"
#include "ruby.h"
#include "perl5.h"
#include "v8.h"
#include "validate.h"

static uint8_t fid[16] = { 1, 2, 3 };

static const char *const server_progs[] = { "server_enter", "server_return" };
static const char *const server_consts[] = { "req_method_off", "header_lookup" };
static const struct validate_probe_def defs[] = {
	{ "go_http_server", server_progs, 2, server_consts, 2 },
};

/* A plan of one server probe set with two consts and two attaches. */
struct plan_fixture {
	Sonde__V1__ProbePlan plan;
	Sonde__V1__ProbeSet set, *sets[VALIDATE_MAX_PROBES + 1];
	Sonde__V1__ProbeConst c[3], *cs[VALIDATE_MAX_CONSTS + 1];
	Sonde__V1__ProbeAttach a[VALIDATE_MAX_ATTACHES + 1], *as[VALIDATE_MAX_ATTACHES + 1];
};

static void plan_init(struct plan_fixture *f)
{
	sonde__v1__probe_plan__init(&f->plan);
	sonde__v1__probe_set__init(&f->set);
	f->plan.file_id.data = fid;
	f->plan.file_id.len = 16;
	f->plan.n_probes = 1;
	f->plan.probes = f->sets;
	f->sets[0] = &f->set;
	f->set.probe = "go_http_server";
	for (int i = 0; i < 3; i++) {
		sonde__v1__probe_const__init(&f->c[i]);
		f->cs[i] = &f->c[i];
	}
	f->c[0].name = "req_method_off";
	f->c[0].value = 8;
	f->c[1].name = "header_lookup";
	f->c[1].value = 1;
	f->set.consts = f->cs;
	f->set.n_consts = 2;
	for (int i = 0; i <= VALIDATE_MAX_ATTACHES; i++) {
		sonde__v1__probe_attach__init(&f->a[i]);
		f->a[i].program = i ? "server_return" : "server_enter";
		f->a[i].file_offset = 0x1000 + (uint64_t)i;
		f->as[i] = &f->a[i];
	}
	f->set.attaches = f->as;
	f->set.n_attaches = 2;
}

static int check_plan(struct plan_fixture *f, const char **reason)
{
	return validate_probe_plan(&f->plan, defs, 1, reason);
}

static void test_plan_good(void **state)
{
	struct plan_fixture f;
	const char *reason = NULL;

	(void)state;
	plan_init(&f);
	assert_int_equal(check_plan(&f, &reason), 0);
	assert_null(reason);
	f.set.n_attaches = VALIDATE_MAX_ATTACHES;
	f.c[0].value = VALIDATE_GO_FIELD_OFF_MAX - 1;
	f.set.n_consts = 0;
	assert_int_equal(check_plan(&f, NULL), 0);
	f.set.n_consts = 2;
	assert_int_equal(check_plan(&f, NULL), 0);
}

static void test_plan_names(void **state)
{
	struct plan_fixture f;
	const char *reason = NULL;
	char longname[VALIDATE_MAX_NAME + 1], longsym[VALIDATE_MAX_SYMBOL + 1];

	(void)state;
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	memset(longsym, 's', sizeof(longsym) - 1);
	longsym[sizeof(longsym) - 1] = '\0';

	plan_init(&f);
	f.set.probe = "go_http_client"; /* not in this catalog */
	assert_int_equal(check_plan(&f, &reason), -EBADMSG);
	assert_non_null(reason);
	plan_init(&f);
	f.set.probe = NULL;
	assert_int_equal(check_plan(&f, NULL), -EBADMSG);
	plan_init(&f);
	f.a[1].program = "client_enter";
	assert_int_equal(check_plan(&f, &reason), -EBADMSG);
	plan_init(&f);
	f.a[1].program = "";
	assert_int_equal(check_plan(&f, NULL), -EBADMSG);
	plan_init(&f);
	f.a[1].program = longname;
	assert_int_equal(check_plan(&f, NULL), -EBADMSG);
	plan_init(&f);
	f.a[1].symbol = longsym;
	assert_int_equal(check_plan(&f, NULL), -EBADMSG);
	longsym[VALIDATE_MAX_SYMBOL - 1] = '\0';
	f.a[1].symbol = longsym;
	assert_int_equal(check_plan(&f, NULL), 0);
	plan_init(&f);
	f.c[1].name = "req_url_off"; /* the client's, not this object's */
	assert_int_equal(check_plan(&f, NULL), -EBADMSG);
	plan_init(&f);
	f.c[1].name = "req_method_off"; /* twice */
	assert_int_equal(check_plan(&f, NULL), -EBADMSG);
	plan_init(&f);
	f.c[1].name = NULL;
	assert_int_equal(check_plan(&f, NULL), -EBADMSG);
}

static void test_plan_bounds(void **state)
{
	struct plan_fixture f;
	uint8_t short_id[15] = { 0 };

	(void)state;
	plan_init(&f);
	f.c[0].value = VALIDATE_GO_FIELD_OFF_MAX;
	assert_int_equal(check_plan(&f, NULL), -EBADMSG);
	plan_init(&f);
	f.c[0].value = UINT64_MAX;
	assert_int_equal(check_plan(&f, NULL), -EBADMSG);
	plan_init(&f);
	f.c[1].value = 2; /* a flag */
	assert_int_equal(check_plan(&f, NULL), -EBADMSG);
	plan_init(&f);
	f.set.n_consts = VALIDATE_MAX_CONSTS + 1;
	assert_int_equal(check_plan(&f, NULL), -EBADMSG);
	plan_init(&f);
	f.set.n_attaches = VALIDATE_MAX_ATTACHES + 1;
	assert_int_equal(check_plan(&f, NULL), -EBADMSG);
	plan_init(&f);
	f.set.n_attaches = 0;
	assert_int_equal(check_plan(&f, NULL), -EBADMSG);
	plan_init(&f);
	f.plan.n_probes = 0;
	assert_int_equal(check_plan(&f, NULL), -EBADMSG);
	plan_init(&f);
	for (int i = 0; i <= VALIDATE_MAX_PROBES; i++)
		f.sets[i] = &f.set;
	f.plan.n_probes = VALIDATE_MAX_PROBES + 1;
	assert_int_equal(check_plan(&f, NULL), -EBADMSG);
	f.plan.n_probes = 2; /* the same probe twice */
	assert_int_equal(check_plan(&f, NULL), -EBADMSG);
	plan_init(&f);
	f.plan.file_id.data = short_id;
	f.plan.file_id.len = sizeof(short_id);
	assert_int_equal(check_plan(&f, NULL), -EBADMSG);
}

/* A set with error set is skipped whatever it holds; a plan of only such
 * sets applies nothing and is refused. */
static void test_plan_error_sets(void **state)
{
	struct plan_fixture f;
	Sonde__V1__ProbeSet bad = SONDE__V1__PROBE_SET__INIT;

	(void)state;
	plan_init(&f);
	bad.probe = "no_such_probe";
	bad.error = "not a Go server";
	f.sets[1] = &bad;
	f.plan.n_probes = 2;
	assert_int_equal(check_plan(&f, NULL), 0);
	f.sets[0] = &bad;
	assert_int_equal(check_plan(&f, NULL), -EBADMSG);
}

static void test_offsets(void **state)
{
	/* Text at file bytes [0x1000, 0x3000), mapped twice. */
	const struct validate_exec_range r[] = {
		{ 0x401000, 0x403000, 0x1000 },
		{ 0x7f0000001000, 0x7f0000002000, 0x1000 },
	};
	uint64_t off[] = { 0x1000, 0x2fff };
	const char *reason = NULL;

	(void)state;
	assert_int_equal(validate_probe_offsets(off, 2, r, 2, &reason), 0);
	off[1] = 0x3000; /* one past the mapping */
	assert_int_equal(validate_probe_offsets(off, 2, r, 2, &reason), -EBADMSG);
	assert_non_null(reason);
	off[1] = 0xfff; /* before it (the r-- headers) */
	assert_int_equal(validate_probe_offsets(off, 2, r, 2, NULL), -EBADMSG);
	off[1] = UINT64_MAX;
	assert_int_equal(validate_probe_offsets(off, 2, r, 2, NULL), -EBADMSG);
	off[1] = 0x1800; /* only in the second mapping's range */
	assert_int_equal(validate_probe_offsets(off, 2, &r[1], 1, NULL), 0);
	off[1] = 0x2800;
	assert_int_equal(validate_probe_offsets(off, 2, &r[1], 1, NULL), -EBADMSG);
	/* Not mapped executable anywhere. */
	assert_int_equal(validate_probe_offsets(off, 1, r, 0, NULL), -EBADMSG);
	/* A mapping with end <= start (cannot come from /proc) holds nothing. */
	const struct validate_exec_range empty = { 0x5000, 0x5000, 0x1000 };
	off[0] = 0x1000;
	assert_int_equal(validate_probe_offsets(off, 1, &empty, 1, NULL), -EBADMSG);
}

/* ---- InterpreterConfigs: one real config per kind, one table of cases ---- */

/* CPython 3.11's layout (symbolizer/interp/cpython_layout.c) in a config
 * for Debian's python3.11. */
#define CPY_FILE_SIZE 6831736ull
#define CPY_RUNTIME 0x65b740ull /* _PyRuntime */
static const struct sonde_cpython_offsets cpython_311 = {
	.major = 3, .minor = 11, .runtime_interpreters_head = 40,
	.interp_threads_head = 16, .tstate_next = 8, .tstate_native_thread_id = 160,
	.tstate_cframe = 56, .cframe_current_frame = 8, .frame_code = 32,
	.frame_previous = 48, .frame_prev_instr = 56, .frame_owner = 69,
	.frame_is_entry = 68, .code_qualname = 128, .code_filename = 112,
	.code_firstlineno = 72, .code_linetable = 136, .code_code_adaptive = 184,
	.ascii_data = 48, .bytes_data = 32, .var_size = 16,
};

/* HotSpot 17's config as the symbolizer reads it from Debian's libjvm.so
 * (test-hotspot-layout checks it against the file). */
#define JVM_FILE_SIZE 24112704ull
#define JVM_ROOT 0x131c600ull /* CodeCache::_heaps */
static const struct sonde_hotspot_offsets hotspot_17 = {
	.major = 17, .codecache_low_static = 0x20, .codecache_high_static = 0x18,
	.codecache_heaps_static = 0, .growable_len = 0, .growable_data = 8,
	.heap_memory = 8, .heap_segmap = 120, .heap_log2_segment = 256, .vs_low = 16,
	.vs_high = 24, .blob_name = 96, .blob_frame_size = 28, .blob_frame_complete = 20,
	.blob_code_begin = 32, .nmethod_method = 112, .nmethod_scopes_data = 120,
	.nmethod_metadata = 260, .nmethod_scopes_pcs = 268, .nmethod_dependencies = 272,
	.method_const = 8, .cmethod_constants = 8, .cmethod_flags = 28,
	.cmethod_code_size = 32, .cmethod_name_index = 34, .cmethod_sig_index = 36,
	.cpool_holder = 24, .cpool_source_index = 54, .klass_name = 24, .symbol_length = 4,
	.symbol_body = 6, .heapblock_size = 16, .cmethod_size = 48, .cpool_size = 72,
	.cmethod_has_lines = 1, .frame_method_slot = 3, .frame_bcp_slot = 8,
	.frame_sender_sp_slot = 1, .nmethod_compile_id4 = 76,
};

/* Node 20's V8 11.3 (Debian's /usr/bin/node, symbolizer/interp/v8/v8_loader.c). */
#define NODE_SIZE 90000000ull
#define NODE_BLOB 0x14c4000ull /* v8_Default_embedded_blob_code_ */
#define NODE_BLOB_SIZE 0x191ab8ull
#define NODE_SIZES 0x13789c0ull /* kBytecodeSizes - the builtins */
static const struct sonde_v8_offsets v8_node20 = {
	.blob_size = NODE_BLOB_SIZE, .fp_context = 8, .fp_function = 16,
	.fp_bytecode_array = 32, .fp_bytecode_offset = 40, .map_instance_type = 12,
	.fn_shared = 24, .fn_code = 48, .sfi_name = 16, .sfi_script = 32,
	.script_name = 16, .string_length = 12, .seq_chars = 16, .thin_actual = 16,
	.code_start = 40, .code_size = 56, .scope_first_slot = 32, .scope_max_inlined = 75,
	.scope_fv_shift = 12, .scope_saved_class_bit = 10, .string_rep_mask = 7,
	.string_seq_tag = 0, .string_thin_tag = 5, .string_onebyte = 8, .type_sfi = 262,
	.type_scope_info = 261, .type_script = 167, .type_bytecode_array = 191,
	.type_code = 245, .first_nonstring = 128, .major = 11, .code_table = 24,
	.array_length = 8, .array_data = 16, .script_source = 8, .bytecode_table = 32,
	.bytecode_data = 54, .code_deopt = 16, .deopt_count = 1, .deopt_literals = 2,
	.deopt_inlining = 7, .bytecode_sizes = NODE_SIZES, .n_bytecodes = 198,
};

/* Ruby 3.1's layout (symbolizer/interp/ruby/ruby_layout.c) in a config
 * for Debian's libruby-3.1.so.3.1. */
#define RUBY_FILE_SIZE 3869264ull
#define RUBY_ROOT 0x3bd370ull /* ruby_current_vm_ptr */
static const struct sonde_ruby_offsets ruby_31 = {
	.major = 3, .minor = 1, .vm_main_ractor = 32, .ec_vm_stack_size = 8,
	.ec_cfp = 16, .ec_thread = 48, .thread_tid = 88, .cfp_size = 64,
	.cfp_iseq = 16, .cfp_ep = 32, .iseq_body = 16, .body_iseq_size = 4,
	.body_iseq_encoded = 8, .body_path = 64, .body_base_label = 72,
	.body_label = 80, .body_first_lineno = 88, .body_insns_body = 120,
	.body_insns_size = 136, .body_succ = 144, .insn_info_size = 12,
	.me_def = 16, .me_owner = 32, .def_original_id = 32, .class_ext = 24,
	.ext_iv_tbl = 8, .st_entries_start = 32, .st_entries_bound = 40,
	.st_entries = 48, .str_heap_len = 16, .str_heap_ptr = 24, .str_embed = 16,
	.ary_heap_len = 16, .ary_heap_ptr = 32, .ary_embed = 16, .ids_index = 1,
	.vm_mark_object_ary = 328, .ractor_running_ec = 520, .id_classpath = 3841,
	.id_attached = 3089,
};

/* PHP 8.2's config (symbolizer/interp/php/php_layout.c) for Debian's php8.2. */
#define PHP_FILE_SIZE 5715672ull
#define PHP_ROOT 0x58ae60ull /* executor_globals */
static const struct sonde_php_offsets php_82 = {
	.major = 8, .minor = 2, .eg_current_execute_data = 488, .ex_func = 24,
	.ex_call_info = 40, .ex_prev = 48, .fn_flags = 4, .fn_name = 8, .fn_scope = 16,
	.op_filename = 152, .op_line_start = 160, .op_opcodes = 88, .op_last = 80,
	.ce_name = 8, .str_len = 16, .str_val = 24, .op_lineno = 24,
	.flags = SONDE_PHP_VM_REGS,
};

/* Perl 5.36's layout (symbolizer/interp/perl/perl_layout.c) in a config
 * for Debian's /usr/bin/perl. */
#define PERL_FILE_SIZE 3804432ull
#define PERL_RUNTIME 0x3a56d8ull /* PL_curinterp */
static const struct sonde_perl_offsets perl_536 = {
	.major = 5, .minor = 36, .interp_curcop = 208, .interp_curstackinfo = 224,
	.si_cxstack = 8, .si_prev = 16, .si_cxix = 32, .cx_size = 104,
	.cx_oldcop = 16, .cx_sub_cv = 72, .cx_retop = 48, .cop_line = 36,
	.cop_file = 48, .xcv_stash = 32, .xcv_gv = 56, .xcv_file = 64,
	.xcv_flags = 92, .xgv_namehek = 32, .xgv_stash = 40, .hv_aux_name = 32,
	.hv_aux_name_count = 60, .hek_len = 4, .hek_key = 8, .cvf_named = 0x8000,
	.interp_op = 8,
};

/* A kind's accepted config: the layout, the runtime offset and the size
 * of the file it was computed from. */
struct config_base {
	uint32_t kind, format_version;
	const void *layout;
	uint32_t len;
	uint64_t file_size, runtime_offset;
};

static const struct config_base bases[] = {
	{ SONDE_INTERP_CPYTHON, SONDE_CPYTHON_FORMAT_VERSION, &cpython_311, sizeof(cpython_311),
	  CPY_FILE_SIZE, CPY_RUNTIME },
	{ SONDE_INTERP_HOTSPOT, SONDE_HOTSPOT_FORMAT_VERSION, &hotspot_17, sizeof(hotspot_17),
	  JVM_FILE_SIZE, JVM_ROOT },
	{ SONDE_INTERP_V8, SONDE_V8_FORMAT_VERSION, &v8_node20, sizeof(v8_node20), NODE_SIZE,
	  NODE_BLOB },
	{ SONDE_INTERP_RUBY, SONDE_RUBY_FORMAT_VERSION, &ruby_31, sizeof(ruby_31), RUBY_FILE_SIZE,
	  RUBY_ROOT },
	{ SONDE_INTERP_PHP, SONDE_PHP_FORMAT_VERSION, &php_82, sizeof(php_82), PHP_FILE_SIZE,
	  PHP_ROOT },
	{ SONDE_INTERP_PERL, SONDE_PERL_FORMAT_VERSION, &perl_536, sizeof(perl_536),
	  PERL_FILE_SIZE, PERL_RUNTIME },
};

/* What a case changes in its kind's base config. */
enum change_at {
	AT_END = 0,        /* no more changes */
	AT_FIELD,          /* a layout field (offset, size) := value */
	AT_RUNTIME_OFFSET, /* the config's runtime_offset */
	AT_FILE_SIZE,      /* the registered file's size */
	AT_FORMAT,         /* format_version */
	AT_KIND,           /* kind (the layout stays the base's) */
	AT_LEN,            /* the layout's length */
	AT_FILE_ID_LEN,    /* the file ID's length */
};

struct change {
	uint8_t at; /* enum change_at */
	uint8_t size;
	uint16_t offset;
	uint64_t value;
};

/* One row: kind's base config with up to four changes, and what
 * validate_interp_config() must return for it. */
struct config_case {
	uint32_t kind;
	int want;
	int line; /* of the row, for a failure's message */
	struct change ch[4];
};

#define ROW(kind, want, ...) { SONDE_INTERP_##kind, want, __LINE__, { __VA_ARGS__ } }
#define FIELD(type, f, v)                                                               \
	{ AT_FIELD, sizeof(((struct type *)0)->f), offsetof(struct type, f), (v) }
#define CPY(f, v) FIELD(sonde_cpython_offsets, f, v)
#define HS(f, v) FIELD(sonde_hotspot_offsets, f, v)
#define V8(f, v) FIELD(sonde_v8_offsets, f, v)
#define RB(f, v) FIELD(sonde_ruby_offsets, f, v)
#define PHP(f, v) FIELD(sonde_php_offsets, f, v)
#define PERL(f, v) FIELD(sonde_perl_offsets, f, v)
#define RO(v) { AT_RUNTIME_OFFSET, 0, 0, (v) }
#define FILE_SIZE(v) { AT_FILE_SIZE, 0, 0, (v) }
#define FORMAT(v) { AT_FORMAT, 0, 0, (v) }
#define KIND(v) { AT_KIND, 0, 0, (v) }
#define LEN(v) { AT_LEN, 0, 0, (v) }
#define FILE_ID_LEN(v) { AT_FILE_ID_LEN, 0, 0, (v) }
#define BAD (-EBADMSG)

static const struct config_case config_cases[] = {
	/* Every kind's base config passes. */
	ROW(CPYTHON, 0), ROW(HOTSPOT, 0), ROW(V8, 0), ROW(RUBY, 0), ROW(PHP, 0), ROW(PERL, 0),

	/* The header: kind, format version, layout size, file ID. */
	ROW(CPYTHON, BAD, KIND(SONDE_INTERP_NONE)),
	ROW(CPYTHON, BAD, KIND(SONDE_INTERP_KINDS)),
	ROW(CPYTHON, BAD, FORMAT(SONDE_CPYTHON_FORMAT_VERSION + 1)),
	ROW(CPYTHON, BAD, LEN(sizeof(struct sonde_cpython_offsets) - 1)),
	ROW(CPYTHON, BAD, LEN(sizeof(struct sonde_cpython_offsets) + 1)),
	ROW(CPYTHON, BAD, FILE_ID_LEN(17)),
	ROW(PHP, BAD, FORMAT(SONDE_PHP_FORMAT_VERSION + 1)),
	ROW(PHP, BAD, LEN(sizeof(struct sonde_php_offsets) - 1)),
	ROW(PHP, BAD, LEN(sizeof(struct sonde_cpython_offsets))), /* a CPython layout's size */
	ROW(RUBY, BAD, LEN(sizeof(struct sonde_ruby_offsets) - 1)),

	/* CPython: 3.10-3.13 layouts, offsets, flags. */
	ROW(CPYTHON, 0, CPY(interp_threads_head, 7344), CPY(runtime_interpreters_head, 632),
	    CPY(code_code_adaptive, 200),
	    CPY(flags, SONDE_CPYTHON_TSTATE_FRAME | SONDE_CPYTHON_ENTRY_SHIM)), /* 3.13's */
	ROW(CPYTHON, BAD, CPY(interp_threads_head, SONDE_CPYTHON_RUNTIME_OFF_MAX)),
	ROW(CPYTHON, BAD, CPY(runtime_interpreters_head, 0xffff)),
	ROW(CPYTHON, BAD, CPY(tstate_next, SONDE_CPYTHON_FIELD_OFF_MAX)),
	ROW(CPYTHON, BAD, CPY(var_size, 0xffff)),
	ROW(CPYTHON, BAD, CPY(frame_is_entry, SONDE_CPYTHON_FIELD_OFF_MAX)),
	ROW(CPYTHON, BAD, CPY(flags, 0x20)),
	ROW(CPYTHON, BAD, CPY(pad, 1)),
	ROW(CPYTHON, BAD, CPY(major, 2)),
	ROW(CPYTHON, BAD, CPY(minor, SONDE_CPYTHON_MINOR_MIN - 1)),
	ROW(CPYTHON, BAD, CPY(minor, SONDE_CPYTHON_MINOR_MAX + 1)),
	ROW(CPYTHON, 0, CPY(minor, SONDE_CPYTHON_MINOR_MAX)),
	/* CPython's first read (8 bytes at _PyRuntime plus its interpreters'
	 * head) inside the image; the file's size itself bounded. */
	ROW(CPYTHON, 0, CPY(runtime_interpreters_head, 632),
	    RO(CPY_FILE_SIZE + SONDE_CPYTHON_IMAGE_SLACK - 632 - 8)),
	ROW(CPYTHON, BAD, RO(CPY_FILE_SIZE + SONDE_CPYTHON_IMAGE_SLACK)),
	ROW(CPYTHON, BAD, RO(CPY_FILE_SIZE + SONDE_CPYTHON_IMAGE_SLACK - 40 - 7)),
	ROW(CPYTHON, BAD, RO(UINT64_MAX - 8)), /* would wrap */
	ROW(CPYTHON, BAD, FILE_SIZE(4096)),    /* a small file */
	ROW(CPYTHON, BAD, FILE_SIZE(UINT64_MAX)),

	/* HotSpot: JDK 11-21, offsets, flags, frame slots; the CodeCache
	 * statics' first reads inside the image. */
	ROW(HOTSPOT, 0, HS(major, 21)),
	ROW(HOTSPOT, BAD, HS(major, 10)), /* releases whose tables are not read */
	ROW(HOTSPOT, BAD, HS(major, 22)),
	ROW(HOTSPOT, BAD, HS(nmethod_dependencies, SONDE_HOTSPOT_FIELD_OFF_MAX)),
	ROW(HOTSPOT, BAD, HS(heap_log2_segment, 0xffff)),
	ROW(HOTSPOT, BAD, HS(frame_bcp_slot, 0)), /* fp itself: no slot */
	ROW(HOTSPOT, BAD, HS(frame_bcp_slot, 17)),
	ROW(HOTSPOT, BAD, HS(cmethod_has_lines, 0)),
	/* The source file index: the pool's offset, or 1 KiB + the class's
	 * (JDK 11), both under 1 KiB. */
	ROW(HOTSPOT, 0, HS(cpool_source_index, SONDE_HOTSPOT_FIELD_OFF_MAX - 1)),
	ROW(HOTSPOT, 0, HS(cpool_source_index, SONDE_HOTSPOT_SOURCE_IN_KLASS + 298)),
	ROW(HOTSPOT, 0, HS(cpool_source_index,
			   SONDE_HOTSPOT_SOURCE_IN_KLASS + SONDE_HOTSPOT_FIELD_OFF_MAX - 1)),
	ROW(HOTSPOT, BAD, HS(cpool_source_index,
			     SONDE_HOTSPOT_SOURCE_IN_KLASS + SONDE_HOTSPOT_FIELD_OFF_MAX)),
	ROW(HOTSPOT, BAD, HS(cpool_source_index, 0xffff)),
	/* The compile id: optional (0), inside the blob header BPF reads. */
	ROW(HOTSPOT, 0, HS(nmethod_compile_id4, 0)),
	ROW(HOTSPOT, 0, HS(nmethod_compile_id4, SONDE_HOTSPOT_COMPILE_ID4_MAX)),
	ROW(HOTSPOT, BAD, HS(nmethod_compile_id4, SONDE_HOTSPOT_COMPILE_ID4_MAX + 1)),
	ROW(HOTSPOT, 0, RO(JVM_FILE_SIZE + SONDE_HOTSPOT_IMAGE_SLACK - 0x20 - 8)),
	ROW(HOTSPOT, BAD, RO(JVM_FILE_SIZE + SONDE_HOTSPOT_IMAGE_SLACK - 0x20 - 7)),
	ROW(HOTSPOT, BAD, HS(codecache_low_static, 0xff),
	    RO(JVM_FILE_SIZE + SONDE_HOTSPOT_IMAGE_SLACK - 0x20 - 8)),

	/* V8: the builtins' range ends inside the image; frame slots 8..127
	 * below fp; scope info bits under 31, string tags under 16, types
	 * under 4096. */
	ROW(V8, 0, RO(NODE_SIZE + SONDE_V8_IMAGE_SLACK - NODE_BLOB_SIZE - 8), V8(bytecode_sizes, 0)),
	ROW(V8, BAD, RO(NODE_SIZE + SONDE_V8_IMAGE_SLACK - NODE_BLOB_SIZE), V8(bytecode_sizes, 0)),
	/* The bytecode lengths: all SONDE_V8_SIZES_MAX bytes BPF may copy
	 * inside the image, the offset under 1 GiB; 0 (and no count): none. */
	ROW(V8, 0, RO(NODE_SIZE + SONDE_V8_IMAGE_SLACK - NODE_SIZES - SONDE_V8_SIZES_MAX)),
	ROW(V8, BAD, RO(NODE_SIZE + SONDE_V8_IMAGE_SLACK - NODE_SIZES - SONDE_V8_SIZES_MAX + 1)),
	ROW(V8, BAD, V8(bytecode_sizes, SONDE_V8_SIZES_OFF_MAX + 1), RO(0),
	    FILE_SIZE(2ull * SONDE_V8_SIZES_OFF_MAX)),
	ROW(V8, 0, V8(bytecode_sizes, SONDE_V8_SIZES_OFF_MAX), RO(0),
	    FILE_SIZE(2ull * SONDE_V8_SIZES_OFF_MAX)),
	ROW(V8, 0, V8(bytecode_sizes, 0), V8(n_bytecodes, 0)),
	ROW(V8, 0, V8(n_bytecodes, 255)),
	ROW(V8, BAD, V8(pad1, 1)),
	ROW(V8, BAD, V8(pad2, 1)),
	ROW(V8, BAD, V8(blob_size, 0)),
	ROW(V8, BAD, V8(blob_size, SONDE_V8_BLOB_MAX + 1), RO(0)),
	ROW(V8, BAD, V8(fp_function, 0)),
	ROW(V8, BAD, V8(fp_function, 128)),
	ROW(V8, BAD, V8(scope_fv_shift, 31)),
	ROW(V8, BAD, V8(string_rep_mask, 16)),
	ROW(V8, BAD, V8(type_sfi, 4096)),
	ROW(V8, BAD, V8(type_code, 0)),
	ROW(V8, BAD, V8(pad0, 1)),
	/* Without the BytecodeArray's offsets (a config cached before they
	 * were read): walked, without interpreted frames' lines. */
	ROW(V8, 0, V8(bytecode_table, 0), V8(bytecode_data, 0)),
	/* Deoptimization data indices under 32 (BPF masks them: a bound,
	 * not a check); without the inlining fields (node without the
	 * constants), optimised frames stay whole. */
	ROW(V8, 0, V8(deopt_inlining, 31)),
	ROW(V8, BAD, V8(deopt_inlining, 32)),
	ROW(V8, BAD, V8(deopt_count, 255)),
	ROW(V8, BAD, V8(deopt_literals, 32)),
	ROW(V8, 0, V8(code_deopt, 0), V8(deopt_count, 0), V8(deopt_literals, 0),
	    V8(deopt_inlining, 0)),

	/* Ruby: 3.1 only, VM and ractor offsets, steps, indices, IDs; the
	 * first read (8 bytes at the root plus vm_ptr_off) in the image. */
	ROW(RUBY, 0, RB(major, 3)),
	ROW(RUBY, BAD, RB(minor, 2)), /* no 3.2 layout */
	ROW(RUBY, BAD, RB(major, 2)),
	ROW(RUBY, 0, RB(ractor_running_ec, SONDE_RUBY_VM_OFF_MAX - 1)),
	ROW(RUBY, BAD, RB(ractor_running_ec, SONDE_RUBY_VM_OFF_MAX)),
	ROW(RUBY, BAD, RB(vm_mark_object_ary, 0xffff)),
	ROW(RUBY, BAD, RB(vm_ptr_off, SONDE_RUBY_VM_OFF_MAX)),
	ROW(RUBY, BAD, RB(cfp_size, 0)), /* the walker steps by it */
	ROW(RUBY, BAD, RB(cfp_size, 97)),
	ROW(RUBY, BAD, RB(insn_info_size, 255)),
	ROW(RUBY, BAD, RB(ids_index, 16)),
	ROW(RUBY, BAD, RB(id_classpath, 0)),
	ROW(RUBY, BAD, RB(pad, 1)),
	ROW(RUBY, 0, RB(body_succ, 255)), /* a byte bounds the small offsets */
	ROW(RUBY, 0, RB(vm_ptr_off, 0), RO(RUBY_FILE_SIZE + SONDE_RUBY_IMAGE_SLACK - 8)),
	ROW(RUBY, BAD, RB(vm_ptr_off, 1), RO(RUBY_FILE_SIZE + SONDE_RUBY_IMAGE_SLACK - 8)),

	/* PHP: 8.2 only, offsets, known flags; the first read (8 bytes at
	 * executor_globals plus its current_execute_data) in the image. */
	ROW(PHP, 0, PHP(flags, 0)),
	ROW(PHP, 0, PHP(eg_current_execute_data, SONDE_PHP_ROOT_OFF_MAX - 1)),
	ROW(PHP, BAD, PHP(eg_current_execute_data, SONDE_PHP_ROOT_OFF_MAX)),
	ROW(PHP, BAD, PHP(ex_prev, SONDE_PHP_FIELD_OFF_MAX)),
	ROW(PHP, BAD, PHP(op_filename, 0xffff)),
	ROW(PHP, BAD, PHP(op_lineno, SONDE_PHP_FIELD_OFF_MAX)),
	ROW(PHP, 0, PHP(str_val, SONDE_PHP_FIELD_OFF_MAX - 1)),
	ROW(PHP, BAD, PHP(flags, 0x2)),
	ROW(PHP, BAD, PHP(pad, 1)),
	ROW(PHP, BAD, PHP(major, 7)),
	ROW(PHP, BAD, PHP(minor, 3)),
	ROW(PHP, 0, RO(PHP_FILE_SIZE + SONDE_PHP_IMAGE_SLACK - 488 - 8)),
	ROW(PHP, BAD, RO(PHP_FILE_SIZE + SONDE_PHP_IMAGE_SLACK - 488 - 7)),

	/* Perl: 5.36 only, interpreter and struct offsets, context size,
	 * CVf_NAMED; the first read (PL_curinterp, 8 bytes) in the image. */
	ROW(PERL, 0, RO(PERL_FILE_SIZE + SONDE_PERL_IMAGE_SLACK - 8)),
	ROW(PERL, BAD, RO(PERL_FILE_SIZE + SONDE_PERL_IMAGE_SLACK - 7)),
	ROW(PERL, BAD, PERL(major, 6)),
	ROW(PERL, BAD, PERL(minor, 38)),
	ROW(PERL, BAD, PERL(interp_curstackinfo, SONDE_PERL_INTERP_OFF_MAX)),
	ROW(PERL, BAD, PERL(interp_op, SONDE_PERL_INTERP_OFF_MAX)),
	ROW(PERL, BAD, PERL(interp_curcop, 0xffff)),
	ROW(PERL, BAD, PERL(cx_size, 15)),
	ROW(PERL, BAD, PERL(cx_size, 257)),
	ROW(PERL, BAD, PERL(cop_line, SONDE_PERL_FIELD_OFF_MAX)),
	ROW(PERL, BAD, PERL(hek_key, 0xffff)),
	ROW(PERL, BAD, PERL(cvf_named, 0x4000)),
	ROW(PERL, BAD, PERL(pad, 1)),
};

static const struct config_base *base_of(uint32_t kind)
{
	for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++)
		if (bases[i].kind == kind)
			return &bases[i];
	fail_msg("no base config for kind %u", kind);
	return NULL;
}

/* validate_interp_config() on t's kind's base config with t's changes. */
static int run_case(const struct config_case *t, const char **reason)
{
	const struct config_base *b = base_of(t->kind);
	uint8_t bytes[SONDE_INTERP_CONFIG_MAX + 1] = { 0 };
	Sonde__V1__InterpreterConfig c;
	uint64_t file_size = b->file_size;

	sonde__v1__interpreter_config__init(&c);
	c.file_id.data = fid;
	c.file_id.len = 16;
	c.kind = b->kind;
	c.format_version = b->format_version;
	c.runtime_offset = b->runtime_offset;
	memcpy(bytes, b->layout, b->len);
	c.layout.data = bytes;
	c.layout.len = b->len;
	for (size_t i = 0; i < 4 && t->ch[i].at != AT_END; i++) {
		const struct change *ch = &t->ch[i];

		switch (ch->at) {
		case AT_FIELD:
			assert_true(ch->offset + ch->size <= b->len);
			for (uint8_t k = 0; k < ch->size; k++) /* little-endian, as BPF reads it */
				bytes[ch->offset + k] = (uint8_t)(ch->value >> (8 * k));
			break;
		case AT_RUNTIME_OFFSET:
			c.runtime_offset = ch->value;
			break;
		case AT_FILE_SIZE:
			file_size = ch->value;
			break;
		case AT_FORMAT:
			c.format_version = (uint32_t)ch->value;
			break;
		case AT_KIND:
			c.kind = (uint32_t)ch->value;
			break;
		case AT_LEN:
			assert_true(ch->value <= sizeof(bytes));
			c.layout.len = ch->value;
			break;
		case AT_FILE_ID_LEN:
			c.file_id.len = ch->value;
			break;
		default:
			fail_msg("case at line %d: change %u", t->line, ch->at);
		}
	}
	return validate_interp_config(&c, file_size, reason);
}

static void test_config_cases(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(config_cases) / sizeof(config_cases[0]); i++) {
		const struct config_case *t = &config_cases[i];
		const char *reason = NULL;
		int r = run_case(t, &reason);

		if (r != t->want)
			fail_msg("the case at line %d: %d (%s), not %d", t->line, r,
				 reason ? reason : "accepted", t->want);
		if (r < 0 && !reason)
			fail_msg("the case at line %d: refused without a reason", t->line);
	}
	assert_int_equal(validate_interp_config(NULL, CPY_FILE_SIZE, NULL), -EBADMSG);
}

/* Each kind's limits table holds every byte of its config exactly once
 * (padding as a field that must be 0), so no byte reaches BPF unchecked,
 * and matches the size of the kind's struct. */
static void test_limits_cover_every_byte(void **state)
{
	(void)state;
	for (uint32_t kind = SONDE_INTERP_CPYTHON; kind < SONDE_INTERP_KINDS; kind++) {
		const struct sonde_interp_limits *lim = sonde_interp_limits_of(kind);
		uint8_t seen[SONDE_INTERP_CONFIG_MAX] = { 0 };

		assert_non_null(lim);
		assert_int_equal(lim->kind, kind);
		assert_int_equal(lim->config_size, base_of(kind)->len);
		assert_true(lim->config_size <= SONDE_INTERP_CONFIG_MAX);
		for (uint32_t i = 0; i < lim->n_fields; i++) {
			const struct sonde_interp_field *f = &lim->fields[i];

			assert_true(f->offset + f->size <= lim->config_size);
			assert_non_null(f->why);
			for (uint32_t k = f->offset; k < f->offset + f->size; k++)
				seen[k]++;
		}
		for (uint32_t k = 0; k < lim->config_size; k++)
			if (seen[k] != 1)
				fail_msg("kind %u: config byte %u is in %u fields", kind, k, seen[k]);
	}
	assert_null(sonde_interp_limits_of(SONDE_INTERP_KINDS));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan_good),
		cmocka_unit_test(test_plan_names),
		cmocka_unit_test(test_plan_bounds),
		cmocka_unit_test(test_plan_error_sets),
		cmocka_unit_test(test_offsets),
		cmocka_unit_test(test_config_cases),
		cmocka_unit_test(test_limits_cover_every_byte),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
