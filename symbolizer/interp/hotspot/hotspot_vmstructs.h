/* hotspot_vmstructs.h - reads the structure tables a HotSpot JVM describes
 * itself with (gHotSpotVMStructs, gHotSpotVMTypes, gHotSpotVMIntConstants,
 * gHotSpotVMLongConstants: the tables the serviceability agent reads) from
 * the libjvm.so *file*, never from a process.
 *
 * In the file the tables are incomplete in two ways, both handled here:
 * - their pointers (names, static field addresses) are filled at load by
 *   R_X86_64_RELATIVE relocations: .rela.dyn is applied to each pointer
 *   read;
 * - the field offsets (VMStructEntry.offset) of Debian's JDK 17 and 21
 *   are computed by the translation unit's static initializer, which GCC
 *   emits as one `movq $imm32, disp32(%rip)` (48 c7 05) per entry: the
 *   initializers' code (the range .init_array points into) is scanned for
 *   such stores into the table's offset column. An entry whose offset has
 *   no store and is 0 in the file is "not found", never a guess. Debian's
 *   JDK 11 holds the offsets in the file as constant data instead: a table
 *   with no such store and some non-zero offsets in the file takes every
 *   offset from the file, 0 included.
 * The entry-layout exports (gHotSpotVMStructEntryTypeNameOffset, ...) are
 * themselves computed at load (they sit in .bss), so the entries are read
 * with the layouts vmStructs.hpp declares (unchanged from JDK 8 to 21),
 * checked by the table's shape: every name a NUL-terminated string inside
 * the file, the end marker within HOTSPOT_VM_MAX_ENTRIES.
 *
 * Every read is bounded by the file's load segments and by what the image
 * holds; a hostile file gives an error or "not found", never a crash or an
 * unbounded loop.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "elf_analysis.h"
#include "file_image.h"

#define HOTSPOT_VM_MAX_ENTRIES 16384   /* per table; JDK 17 has 788 fields */
#define HOTSPOT_VM_MAX_NAME 256        /* a type or field name, with its NUL */
#define HOTSPOT_VM_MAX_INIT_CODE (4u << 20) /* bytes of initializer code scanned */
#define HOTSPOT_VM_MAX_RELOCS (8u << 20)    /* .rela.dyn entries read */

enum hotspot_vm_query_kind {
	HOTSPOT_VM_OFFSET = 0, /* a non-static field's offset in its type */
	HOTSPOT_VM_ADDRESS,    /* a static field's address (file vaddr) */
	/* the rest by name only (type NULL): */
	HOTSPOT_VM_SIZE,       /* a type's size; name is the type's */
	HOTSPOT_VM_INT,        /* an int constant */
	HOTSPOT_VM_LONG,       /* a long constant */
};

/* One thing to look up; found and value are filled by hotspot_vm_read(). */
struct hotspot_vm_query {
	uint8_t kind; /* enum hotspot_vm_query_kind */
	const char *type; /* "CodeBlob"; NULL for sizes and constants */
	const char *name; /* "_frame_size", or the constant's name */
	bool found;
	int64_t value;
};

/* Adds to need what hotspot_vm_read() will read (.dynsym, .dynstr,
 * .rela.dyn, .init_array, .data.rel.ro, .data, .rodata, then the
 * initializers' code). Returns 0 (all there), -EAGAIN (fetch need first),
 * -ENOENT (no vmStructs tables: not a libjvm), -EPROTONOSUPPORT (not
 * x86-64 ELF) or -EBADMSG; *reason (static) says why. */
int hotspot_vm_need(const struct file_image *img, struct elf_need *need, const char **reason);

/* Answers q[0..n) from img's tables. Returns 0 (each q[i].found says
 * whether it was answered), -ENOENT (no tables), -EPROTONOSUPPORT,
 * -EBADMSG (damaged tables or a range not in the image) or -ENOMEM;
 * *reason (static) says why. */
int hotspot_vm_read(const struct file_image *img, struct hotspot_vm_query *q, size_t n,
		    const char **reason);

/* The int at a static's address in the file (an initialised global, e.g.
 * Abstract_VM_Version::_vm_major_version): 0 with *ret, -ENOENT (not in
 * the file's bytes: computed at run time) or -EBADMSG. */
int hotspot_vm_read_static_int(const struct file_image *img, uint64_t vaddr, int32_t *ret);
