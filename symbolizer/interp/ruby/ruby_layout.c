/* ruby_layout.c - Ruby structure offsets (ruby_layout.h).
 *
 * 3.1 (Debian 12's ruby3.1 3.1.2, x86-64), checked against the installed
 * libruby-3.1.so.3.1 (stripped, no debug package reachable):
 * - by disassembly of exported functions: rb_profile_frames reads
 *   ec->vm_stack (0), vm_stack_size (8), cfp (16), steps control frames by
 *   0x40 and tests the env flags at cfp->ep (0x20); rb_thread_current
 *   reads ec->thread_ptr (0x30); rb_id2str takes the serial as ID >> 4
 *   above 0xa9 and indexes chunks of 512 (string, symbol) pairs;
 * - with gdb on a running ruby3.1 (a Python script reading memory only):
 *   ruby_current_vm_ptr -> vm + 32 is the main ractor, whose pointer at
 *   520 is the execution context whose thread_ptr is vm->main_thread; that
 *   thread's kernel tid is the int at 88; walking the control frames with
 *   the iseq body offsets below gave the program's own labels, paths,
 *   first lines and line numbers (entries of 12 bytes, line first), the
 *   method entries' owners' __classpath__ ("Foo", "Integer"), and
 *   global_symbols.ids was element 1 of the first chunk of
 *   vm->mark_object_ary (vm + 328); rb_intern gave the ivar IDs
 *   __classpath__ 3841 and __attached__ 3089.
 * tests/integration/test_ruby_frames.py checks the whole walk end to end.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ruby_layout.h"

static const struct sonde_ruby_offsets ruby_31 = {
	.major = 3,
	.minor = 1,
	.vm_main_ractor = 32, /* vm->ractor.main_ractor */
	.ec_vm_stack = 0,
	.ec_vm_stack_size = 8,
	.ec_cfp = 16,
	.ec_thread = 48,
	.thread_tid = 88, /* native_thread_data.tid */
	.cfp_size = 64,   /* pc, sp, iseq, self, ep, block_code, __bp__, jit_return */
	.cfp_pc = 0,
	.cfp_iseq = 16,
	.cfp_ep = 32,
	.iseq_body = 16,
	.body_iseq_size = 4,
	.body_iseq_encoded = 8,
	.body_path = 64,       /* location.pathobj: String or [path, realpath] */
	.body_base_label = 72, /* location.base_label */
	.body_label = 80,      /* location.label */
	.body_first_lineno = 88,
	.body_insns_body = 120, /* insns_info.body */
	.body_insns_size = 136, /* insns_info.size */
	.body_succ = 144,       /* insns_info.succ_index_table */
	.insn_info_size = 12,   /* line_no, node_id, events */
	.me_def = 16,
	.me_owner = 32,
	.def_original_id = 32,
	.class_ext = 24, /* RClass.ptr */
	.ext_iv_tbl = 8,
	.st_entries_start = 32,
	.st_entries_bound = 40,
	.st_entries = 48,
	.str_heap_len = 16,
	.str_heap_ptr = 24,
	.str_embed = 16,
	.ary_heap_len = 16,
	.ary_heap_ptr = 32,
	.ary_embed = 16,
	.ids_index = 1,
	.vm_ptr_off = 0,
	.vm_mark_object_ary = 328,
	.ractor_running_ec = 520,
	.id_classpath = 3841,
	.id_attached = 3089,
};

const struct sonde_ruby_offsets *ruby_layout_for(unsigned major, unsigned minor)
{
	return major == 3 && minor == 1 ? &ruby_31 : NULL;
}

/* "3.1" followed by end, '.' or '-' at s: *major, *minor; the characters
 * read, or 0. */
static int parse_version(const char *s, unsigned *major, unsigned *minor)
{
	unsigned a = 0, b = 0;
	int i = 0, j;

	if (s[i] < '0' || s[i] > '9' || s[i + 1] != '.')
		return 0;
	a = (unsigned)(s[i] - '0');
	i += 2;
	for (j = 0; j < 2 && s[i] >= '0' && s[i] <= '9'; j++, i++)
		b = b * 10 + (unsigned)(s[i] - '0');
	if (!j || (s[i] && s[i] != '.' && s[i] != '-'))
		return 0;
	*major = a;
	*minor = b;
	return i;
}

int ruby_version_from_name(const char *path, unsigned *major, unsigned *minor)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	if (!strncmp(base, "libruby-", 8)) {
		int n = parse_version(base + 8, major, minor);

		if (n && !strncmp(base + 8 + n, ".so", 3) &&
		    (base[8 + n + 3] == '\0' || base[8 + n + 3] == '.'))
			return 0;
	} else if (!strncmp(base, "libruby.so.", 11)) {
		if (parse_version(base + 11, major, minor))
			return 0;
	}
	return -ENOENT;
}
