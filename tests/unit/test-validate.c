/* test-validate.c - sensor/validate.c: what the sensor accepts from the
 * symbolizer. A good ProbePlan and InterpreterConfig pass; each bound
 * (names from the probe objects' catalog, counts, const values, attach
 * offsets against executable mappings, layout size and offsets, runtime
 * offset against the file's size) refuses what is one past it. */
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

/* CPython 3.11's layout (symbolizer/interp/cpython_layout.c). */
static struct sonde_cpython_offsets layout_311(void)
{
	return (struct sonde_cpython_offsets){
		.major = 3, .minor = 11, .runtime_interpreters_head = 40,
		.interp_threads_head = 16, .tstate_next = 8, .tstate_native_thread_id = 160,
		.tstate_cframe = 56, .cframe_current_frame = 8, .frame_code = 32,
		.frame_previous = 48, .frame_prev_instr = 56, .frame_owner = 69,
		.frame_is_entry = 68, .code_qualname = 128, .code_filename = 112,
		.code_firstlineno = 72, .code_linetable = 136, .code_code_adaptive = 184,
		.ascii_data = 48, .bytes_data = 32, .var_size = 16,
	};
}

struct config_fixture {
	Sonde__V1__InterpreterConfig c;
	struct sonde_cpython_offsets o;
	uint8_t bytes[sizeof(struct sonde_cpython_offsets) + 1];
};

#define FILE_SIZE 6831736ull   /* Debian's python3.11 */
#define RUNTIME_OFFSET 0x65b740 /* its _PyRuntime */

static void config_init(struct config_fixture *f)
{
	sonde__v1__interpreter_config__init(&f->c);
	f->c.file_id.data = fid;
	f->c.file_id.len = 16;
	f->c.kind = SONDE_INTERP_CPYTHON;
	f->c.format_version = SONDE_CPYTHON_FORMAT_VERSION;
	f->c.runtime_offset = RUNTIME_OFFSET;
	f->o = layout_311();
	f->c.layout.data = f->bytes;
	f->c.layout.len = sizeof(f->o);
}

static int check_config(struct config_fixture *f, const char **reason)
{
	memcpy(f->bytes, &f->o, sizeof(f->o));
	return validate_interp_config(&f->c, FILE_SIZE, reason);
}

static void test_config_good(void **state)
{
	struct config_fixture f;
	const char *reason = NULL;

	(void)state;
	config_init(&f);
	assert_int_equal(check_config(&f, &reason), 0);
	/* 3.13's large interpreter offset and flags. */
	f.o.interp_threads_head = 7344;
	f.o.runtime_interpreters_head = 632;
	f.o.code_code_adaptive = 200;
	f.o.flags = SONDE_CPYTHON_TSTATE_FRAME | SONDE_CPYTHON_ENTRY_SHIM;
	assert_int_equal(check_config(&f, NULL), 0);
	/* At the very end of the image: the first read still fits. */
	f.c.runtime_offset = FILE_SIZE + SONDE_CPYTHON_IMAGE_SLACK - 632 - 8;
	assert_int_equal(check_config(&f, NULL), 0);
}

static void test_config_header(void **state)
{
	struct config_fixture f;
	const char *reason = NULL;

	(void)state;
	config_init(&f);
	f.c.kind = SONDE_INTERP_NONE;
	assert_int_equal(check_config(&f, &reason), -EBADMSG);
	assert_non_null(reason);
	config_init(&f);
	f.c.kind = 7;
	assert_int_equal(check_config(&f, NULL), -EBADMSG);
	config_init(&f);
	f.c.format_version = SONDE_CPYTHON_FORMAT_VERSION + 1;
	assert_int_equal(check_config(&f, NULL), -EBADMSG);
	config_init(&f);
	f.c.layout.len = sizeof(f.o) - 1;
	assert_int_equal(check_config(&f, NULL), -EBADMSG);
	f.c.layout.len = sizeof(f.o) + 1;
	assert_int_equal(check_config(&f, NULL), -EBADMSG);
	config_init(&f);
	f.c.file_id.len = 17;
	assert_int_equal(check_config(&f, NULL), -EBADMSG);
}

static void test_config_layout_bounds(void **state)
{
	struct config_fixture f;

	(void)state;
	config_init(&f);
	f.o.interp_threads_head = SONDE_CPYTHON_RUNTIME_OFF_MAX;
	assert_int_equal(check_config(&f, NULL), -EBADMSG);
	config_init(&f);
	f.o.runtime_interpreters_head = 0xffff;
	assert_int_equal(check_config(&f, NULL), -EBADMSG);
	config_init(&f);
	f.o.tstate_next = SONDE_CPYTHON_FIELD_OFF_MAX;
	assert_int_equal(check_config(&f, NULL), -EBADMSG);
	config_init(&f);
	f.o.var_size = 0xffff;
	assert_int_equal(check_config(&f, NULL), -EBADMSG);
	config_init(&f);
	f.o.frame_is_entry = SONDE_CPYTHON_FIELD_OFF_MAX;
	assert_int_equal(check_config(&f, NULL), -EBADMSG);
	config_init(&f);
	f.o.flags = 0x20;
	assert_int_equal(check_config(&f, NULL), -EBADMSG);
	config_init(&f);
	f.o.pad = 1;
	assert_int_equal(check_config(&f, NULL), -EBADMSG);
	config_init(&f);
	f.o.major = 2;
	assert_int_equal(check_config(&f, NULL), -EBADMSG);
	config_init(&f);
	f.o.minor = SONDE_CPYTHON_MINOR_MIN - 1;
	assert_int_equal(check_config(&f, NULL), -EBADMSG);
	config_init(&f);
	f.o.minor = SONDE_CPYTHON_MINOR_MAX + 1;
	assert_int_equal(check_config(&f, NULL), -EBADMSG);
	config_init(&f);
	f.o.minor = SONDE_CPYTHON_MINOR_MAX;
	assert_int_equal(check_config(&f, NULL), 0);
}

static void test_config_runtime_offset(void **state)
{
	struct config_fixture f;

	(void)state;
	config_init(&f);
	f.c.runtime_offset = FILE_SIZE + SONDE_CPYTHON_IMAGE_SLACK;
	assert_int_equal(check_config(&f, NULL), -EBADMSG);
	f.c.runtime_offset = FILE_SIZE + SONDE_CPYTHON_IMAGE_SLACK - 40 - 7; /* read ends past */
	assert_int_equal(check_config(&f, NULL), -EBADMSG);
	f.c.runtime_offset = UINT64_MAX - 8; /* would wrap */
	assert_int_equal(check_config(&f, NULL), -EBADMSG);
	f.c.runtime_offset = RUNTIME_OFFSET;
	memcpy(f.bytes, &f.o, sizeof(f.o));
	assert_int_equal(validate_interp_config(&f.c, 4096, NULL), -EBADMSG); /* a small file */
	assert_int_equal(validate_interp_config(&f.c, UINT64_MAX, NULL), -EBADMSG);
	assert_int_equal(validate_interp_config(NULL, FILE_SIZE, NULL), -EBADMSG);
}

/* Node 20's V8 11.3 (Debian's /usr/bin/node, symbolizer/interp/v8/v8_loader.c). */
#define NODE_SIZE 90000000ull
#define NODE_BLOB 0x14c4000ull
static struct sonde_v8_offsets v8_node20(void)
{
	return (struct sonde_v8_offsets){
		.blob_size = 0x191ab8, .fp_context = 8, .fp_function = 16,
		.fp_bytecode_array = 32, .fp_bytecode_offset = 40, .map_instance_type = 12,
		.fn_shared = 24, .fn_code = 48, .sfi_name = 16, .sfi_script = 32,
		.script_name = 16, .string_length = 12, .seq_chars = 16, .thin_actual = 16,
		.code_start = 40, .code_size = 56, .scope_first_slot = 32, .scope_max_inlined = 75,
		.scope_fv_shift = 12, .scope_saved_class_bit = 10, .string_rep_mask = 7,
		.string_seq_tag = 0, .string_thin_tag = 5, .string_onebyte = 8, .type_sfi = 262,
		.type_scope_info = 261, .type_script = 167, .type_bytecode_array = 191,
		.type_code = 245, .first_nonstring = 128, .major = 11, .code_table = 24,
		.array_length = 8, .array_data = 16, .script_source = 8,
	};
}

static int check_v8(struct sonde_v8_offsets o, uint64_t runtime_offset)
{
	Sonde__V1__InterpreterConfig c;

	sonde__v1__interpreter_config__init(&c);
	c.file_id.data = fid;
	c.file_id.len = 16;
	c.kind = SONDE_INTERP_V8;
	c.format_version = SONDE_V8_FORMAT_VERSION;
	c.runtime_offset = runtime_offset;
	c.layout.data = (uint8_t *)&o;
	c.layout.len = sizeof(o);
	return validate_interp_config(&c, NODE_SIZE, NULL);
}

static void test_config_v8(void **state)
{
	struct sonde_v8_offsets o;

	(void)state;
	assert_int_equal(check_v8(v8_node20(), NODE_BLOB), 0);
	/* The builtins' range must end inside the image. */
	o = v8_node20();
	assert_int_equal(check_v8(o, NODE_SIZE + SONDE_V8_IMAGE_SLACK - o.blob_size - 8), 0);
	assert_int_equal(check_v8(o, NODE_SIZE + SONDE_V8_IMAGE_SLACK - o.blob_size), -EBADMSG);
	o.blob_size = 0;
	assert_int_equal(check_v8(o, NODE_BLOB), -EBADMSG);
	o.blob_size = SONDE_V8_BLOB_MAX + 1;
	assert_int_equal(check_v8(o, 0), -EBADMSG);
	/* Frame slots 8..127 below fp. */
	o = v8_node20();
	o.fp_function = 0;
	assert_int_equal(check_v8(o, NODE_BLOB), -EBADMSG);
	o.fp_function = 128;
	assert_int_equal(check_v8(o, NODE_BLOB), -EBADMSG);
	/* Scope info bits under 31, string tags under 16, types under 4096. */
	o = v8_node20();
	o.scope_fv_shift = 31;
	assert_int_equal(check_v8(o, NODE_BLOB), -EBADMSG);
	o = v8_node20();
	o.string_rep_mask = 16;
	assert_int_equal(check_v8(o, NODE_BLOB), -EBADMSG);
	o = v8_node20();
	o.type_sfi = 4096;
	assert_int_equal(check_v8(o, NODE_BLOB), -EBADMSG);
	o = v8_node20();
	o.type_code = 0;
	assert_int_equal(check_v8(o, NODE_BLOB), -EBADMSG);
	o = v8_node20();
	o.pad = 1;
	assert_int_equal(check_v8(o, NODE_BLOB), -EBADMSG);
}

/* HotSpot 17's config as the symbolizer reads it from Debian's libjvm.so
 * (test-hotspot-layout checks it against the file). */
static struct sonde_hotspot_offsets hotspot_17(void)
{
	return (struct sonde_hotspot_offsets){
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
}

#define JVM_FILE_SIZE 24112704ull /* Debian's libjvm.so */
#define JVM_ROOT 0x131c600        /* its CodeCache::_heaps */

static int check_hotspot(struct sonde_hotspot_offsets o, uint64_t runtime_offset)
{
	Sonde__V1__InterpreterConfig c;

	sonde__v1__interpreter_config__init(&c);
	c.file_id.data = fid;
	c.file_id.len = 16;
	c.kind = SONDE_INTERP_HOTSPOT;
	c.format_version = SONDE_HOTSPOT_FORMAT_VERSION;
	c.runtime_offset = runtime_offset;
	c.layout.data = (uint8_t *)&o;
	c.layout.len = sizeof(o);
	return validate_interp_config(&c, JVM_FILE_SIZE, NULL);
}

static void test_hotspot_config(void **state)
{
	struct sonde_hotspot_offsets o;

	(void)state;
	assert_int_equal(check_hotspot(hotspot_17(), JVM_ROOT), 0);
	o = hotspot_17();
	o.major = 21;
	assert_int_equal(check_hotspot(o, JVM_ROOT), 0);
	o.major = 10; /* releases whose tables are not read */
	assert_int_equal(check_hotspot(o, JVM_ROOT), -EBADMSG);
	o.major = 22;
	assert_int_equal(check_hotspot(o, JVM_ROOT), -EBADMSG);
	o = hotspot_17();
	o.nmethod_dependencies = SONDE_HOTSPOT_FIELD_OFF_MAX;
	assert_int_equal(check_hotspot(o, JVM_ROOT), -EBADMSG);
	o = hotspot_17();
	o.heap_log2_segment = 0xffff;
	assert_int_equal(check_hotspot(o, JVM_ROOT), -EBADMSG);
	o = hotspot_17();
	o.frame_bcp_slot = 0; /* fp itself: no slot */
	assert_int_equal(check_hotspot(o, JVM_ROOT), -EBADMSG);
	o.frame_bcp_slot = 17;
	assert_int_equal(check_hotspot(o, JVM_ROOT), -EBADMSG);
	o = hotspot_17();
	o.cmethod_has_lines = 0;
	assert_int_equal(check_hotspot(o, JVM_ROOT), -EBADMSG);
	/* The compile id: optional (0), inside the blob header BPF reads. */
	o = hotspot_17();
	o.nmethod_compile_id4 = 0;
	assert_int_equal(check_hotspot(o, JVM_ROOT), 0);
	o.nmethod_compile_id4 = SONDE_HOTSPOT_COMPILE_ID4_MAX;
	assert_int_equal(check_hotspot(o, JVM_ROOT), 0);
	o.nmethod_compile_id4 = SONDE_HOTSPOT_COMPILE_ID4_MAX + 1;
	assert_int_equal(check_hotspot(o, JVM_ROOT), -EBADMSG);
	/* The statics' first reads stay inside the image. */
	o = hotspot_17();
	assert_int_equal(check_hotspot(o, JVM_FILE_SIZE + SONDE_HOTSPOT_IMAGE_SLACK - 0x20 - 8), 0);
	assert_int_equal(check_hotspot(o, JVM_FILE_SIZE + SONDE_HOTSPOT_IMAGE_SLACK - 0x20 - 7),
			 -EBADMSG);
	o.codecache_low_static = 0xff;
	assert_int_equal(check_hotspot(o, JVM_FILE_SIZE + SONDE_HOTSPOT_IMAGE_SLACK - 0x20 - 8),
			 -EBADMSG);
}

/* Ruby 3.1's layout (symbolizer/interp/ruby/ruby_layout.c) and its
 * limits (bpf/ruby.h). */

/* Ruby 3.1's layout (symbolizer/interp/ruby/ruby_layout.c) and its
 * limits (bpf/ruby.h). */
static void test_config_ruby(void **state)
{
	const struct sonde_ruby_offsets l31 = {
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
	const uint64_t size = 3869264, root = 0x3bd370; /* libruby-3.1.so.3.1, ruby_current_vm_ptr */
	struct sonde_ruby_offsets o;
	uint8_t bytes[sizeof(o)];
	Sonde__V1__InterpreterConfig c;
	const char *reason = NULL;

	(void)state;
	sonde__v1__interpreter_config__init(&c);
	c.file_id.data = fid;
	c.file_id.len = 16;
	c.kind = SONDE_INTERP_RUBY;
	c.format_version = SONDE_RUBY_FORMAT_VERSION;
	c.runtime_offset = root;
	c.layout.data = bytes;
	c.layout.len = sizeof(o);
#define RB_CHECK(field, value, want)                                              \
	do {                                                                      \
		o = l31;                                                          \
		o.field = value;                                                  \
		memcpy(bytes, &o, sizeof(o));                                     \
		assert_int_equal(validate_interp_config(&c, size, &reason), want); \
	} while (0)
	RB_CHECK(major, 3, 0);
	RB_CHECK(minor, 2, -EBADMSG);      /* no 3.2 layout */
	RB_CHECK(major, 2, -EBADMSG);
	RB_CHECK(ractor_running_ec, SONDE_RUBY_VM_OFF_MAX - 1, 0);
	RB_CHECK(ractor_running_ec, SONDE_RUBY_VM_OFF_MAX, -EBADMSG);
	RB_CHECK(vm_mark_object_ary, 0xffff, -EBADMSG);
	RB_CHECK(vm_ptr_off, SONDE_RUBY_VM_OFF_MAX, -EBADMSG);
	RB_CHECK(cfp_size, 0, -EBADMSG);   /* the walker steps by it */
	RB_CHECK(cfp_size, 97, -EBADMSG);
	RB_CHECK(insn_info_size, 255, -EBADMSG);
	RB_CHECK(ids_index, 16, -EBADMSG);
	RB_CHECK(id_classpath, 0, -EBADMSG);
	RB_CHECK(pad, 1, -EBADMSG);
	RB_CHECK(body_succ, 255, 0);       /* a byte bounds the small offsets */
	/* The first read (8 bytes at the root plus vm_ptr_off) in the image. */
	c.runtime_offset = size + SONDE_RUBY_IMAGE_SLACK - 8;
	RB_CHECK(vm_ptr_off, 0, 0);
	RB_CHECK(vm_ptr_off, 1, -EBADMSG);
	c.runtime_offset = root;
	c.layout.len = sizeof(o) - 1;
	RB_CHECK(major, 3, -EBADMSG);
#undef RB_CHECK
}

/* Perl 5.36's layout (symbolizer/interp/perl/perl_layout.c) in a config
 * for Debian's /usr/bin/perl. */
#define PERL_FILE_SIZE 3804432ull
#define PERL_RUNTIME_OFFSET 0x3a56d8

static int check_perl(const struct sonde_perl_offsets *o, uint64_t runtime_offset,
		      const char **reason)
{
	Sonde__V1__InterpreterConfig c;
	uint8_t bytes[sizeof(*o)];

	sonde__v1__interpreter_config__init(&c);
	c.file_id.data = fid;
	c.file_id.len = 16;
	c.kind = SONDE_INTERP_PERL;
	c.format_version = SONDE_PERL_FORMAT_VERSION;
	c.runtime_offset = runtime_offset;
	memcpy(bytes, o, sizeof(*o));
	c.layout.data = bytes;
	c.layout.len = sizeof(bytes);
	return validate_interp_config(&c, PERL_FILE_SIZE, reason);
}

static struct sonde_perl_offsets layout_536(void)
{
	return (struct sonde_perl_offsets){
		.major = 5, .minor = 36, .interp_curcop = 208, .interp_curstackinfo = 224,
		.si_cxstack = 8, .si_prev = 16, .si_cxix = 32, .cx_size = 104,
		.cx_oldcop = 16, .cx_sub_cv = 72, .cx_retop = 48, .cop_line = 36,
		.cop_file = 48, .xcv_stash = 32, .xcv_gv = 56, .xcv_file = 64,
		.xcv_flags = 92, .xgv_namehek = 32, .xgv_stash = 40, .hv_aux_name = 32,
		.hv_aux_name_count = 60, .hek_len = 4, .hek_key = 8, .cvf_named = 0x8000,
		.interp_op = 8,
	};
}

static void test_perl_config(void **state)
{
	struct sonde_perl_offsets o = layout_536();
	const char *reason = NULL;

	(void)state;
	assert_int_equal(check_perl(&o, PERL_RUNTIME_OFFSET, &reason), 0);
	/* The first read (PL_curinterp, 8 bytes) at the image's very end. */
	assert_int_equal(check_perl(&o, PERL_FILE_SIZE + SONDE_PERL_IMAGE_SLACK - 8, NULL), 0);
	assert_int_equal(check_perl(&o, PERL_FILE_SIZE + SONDE_PERL_IMAGE_SLACK - 7, &reason),
			 -EBADMSG);
	assert_non_null(reason);
	/* Versions without a layout. */
	o.major = 6;
	assert_int_equal(check_perl(&o, PERL_RUNTIME_OFFSET, NULL), -EBADMSG);
	o = layout_536();
	o.minor = 38;
	assert_int_equal(check_perl(&o, PERL_RUNTIME_OFFSET, NULL), -EBADMSG);
	/* Every field's bounds. */
	o = layout_536();
	o.interp_curstackinfo = SONDE_PERL_INTERP_OFF_MAX;
	assert_int_equal(check_perl(&o, PERL_RUNTIME_OFFSET, NULL), -EBADMSG);
	o = layout_536();
	o.interp_op = SONDE_PERL_INTERP_OFF_MAX;
	assert_int_equal(check_perl(&o, PERL_RUNTIME_OFFSET, NULL), -EBADMSG);
	o = layout_536();
	o.interp_curcop = 0xffff;
	assert_int_equal(check_perl(&o, PERL_RUNTIME_OFFSET, NULL), -EBADMSG);
	o = layout_536();
	o.cx_size = 15;
	assert_int_equal(check_perl(&o, PERL_RUNTIME_OFFSET, NULL), -EBADMSG);
	o.cx_size = 257;
	assert_int_equal(check_perl(&o, PERL_RUNTIME_OFFSET, NULL), -EBADMSG);
	o = layout_536();
	o.cop_line = SONDE_PERL_FIELD_OFF_MAX;
	assert_int_equal(check_perl(&o, PERL_RUNTIME_OFFSET, NULL), -EBADMSG);
	o = layout_536();
	o.hek_key = 0xffff;
	assert_int_equal(check_perl(&o, PERL_RUNTIME_OFFSET, NULL), -EBADMSG);
	o = layout_536();
	o.cvf_named = 0x4000;
	assert_int_equal(check_perl(&o, PERL_RUNTIME_OFFSET, NULL), -EBADMSG);
	o = layout_536();
	o.pad = 1;
	assert_int_equal(check_perl(&o, PERL_RUNTIME_OFFSET, NULL), -EBADMSG);
}

/* PHP 8.2's config (symbolizer/interp/php/php_layout.c) against its
 * limits (bpf/php.h). */
static void test_php_config(void **state)
{
	const struct sonde_php_offsets good = {
		.major = 8, .minor = 2, .eg_current_execute_data = 488, .ex_func = 24,
		.ex_call_info = 40, .ex_prev = 48, .fn_flags = 4, .fn_name = 8, .fn_scope = 16,
		.op_filename = 152, .op_line_start = 160, .op_opcodes = 88, .op_last = 80,
		.ce_name = 8, .str_len = 16, .str_val = 24, .op_lineno = 24,
		.flags = SONDE_PHP_VM_REGS,
	};
	const uint64_t file_size = 5715672, root = 0x58ae60; /* Debian's php8.2 */
	uint8_t bytes[sizeof(good)];
	Sonde__V1__InterpreterConfig c;
	struct sonde_php_offsets o;
	const char *reason = NULL;

#define PHP_CHECK(mutate, want)                                              \
	do {                                                                 \
		o = good;                                                    \
		c.runtime_offset = root;                                     \
		mutate;                                                      \
		memcpy(bytes, &o, sizeof(o));                                \
		assert_int_equal(validate_interp_config(&c, file_size, &reason), want); \
	} while (0)
	(void)state;
	sonde__v1__interpreter_config__init(&c);
	c.file_id.data = fid;
	c.file_id.len = 16;
	c.kind = SONDE_INTERP_PHP;
	c.format_version = SONDE_PHP_FORMAT_VERSION;
	c.layout.data = bytes;
	c.layout.len = sizeof(good);
	PHP_CHECK((void)0, 0);
	PHP_CHECK(o.flags = 0, 0);
	PHP_CHECK(o.eg_current_execute_data = SONDE_PHP_ROOT_OFF_MAX - 1, 0);
	PHP_CHECK(o.eg_current_execute_data = SONDE_PHP_ROOT_OFF_MAX, -EBADMSG);
	PHP_CHECK(o.ex_prev = SONDE_PHP_FIELD_OFF_MAX, -EBADMSG);
	PHP_CHECK(o.op_filename = 0xffff, -EBADMSG);
	PHP_CHECK(o.op_lineno = SONDE_PHP_FIELD_OFF_MAX, -EBADMSG);
	PHP_CHECK(o.str_val = SONDE_PHP_FIELD_OFF_MAX - 1, 0);
	PHP_CHECK(o.flags = 0x2, -EBADMSG);
	PHP_CHECK(o.pad = 1, -EBADMSG);
	PHP_CHECK(o.major = 7, -EBADMSG);
	PHP_CHECK(o.minor = 3, -EBADMSG);
	PHP_CHECK(c.runtime_offset = file_size + SONDE_PHP_IMAGE_SLACK - 488 - 8, 0);
	PHP_CHECK(c.runtime_offset = file_size + SONDE_PHP_IMAGE_SLACK - 488 - 7, -EBADMSG);
	PHP_CHECK(c.format_version = SONDE_PHP_FORMAT_VERSION + 1, -EBADMSG);
	c.format_version = SONDE_PHP_FORMAT_VERSION;
	c.layout.len = sizeof(good) - 1;
	PHP_CHECK((void)0, -EBADMSG);
	c.layout.len = sizeof(good);
	/* A CPython layout under PHP's kind: its size is not PHP's. */
	c.layout.len = sizeof(struct sonde_cpython_offsets);
	PHP_CHECK((void)0, -EBADMSG);
#undef PHP_CHECK
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan_good),
		cmocka_unit_test(test_plan_names),
		cmocka_unit_test(test_plan_bounds),
		cmocka_unit_test(test_plan_error_sets),
		cmocka_unit_test(test_offsets),
		cmocka_unit_test(test_config_good),
		cmocka_unit_test(test_config_header),
		cmocka_unit_test(test_config_layout_bounds),
		cmocka_unit_test(test_config_runtime_offset),
		cmocka_unit_test(test_hotspot_config),
		cmocka_unit_test(test_config_v8),
		cmocka_unit_test(test_config_ruby),
		cmocka_unit_test(test_perl_config),
		cmocka_unit_test(test_php_config),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
