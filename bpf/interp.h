/* interp.h - what every interpreter walker shares with the sensor and the
 * symbolizer (docs/interpreters.md): the kinds, the per-process config in
 * the interp_procs map, and the kind-tagged record a walker sends on the
 * ring. A runtime's own layout sits inside these as bytes: its walker
 * header (bpf/cpython.h, ...) gives it; the sensor copies it without
 * reading it, after checking it against the kind's limits
 * (bpf/interp_kinds.h).
 */
#pragma once

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Same numbers as sonde.v1.InterpreterConfig.kind, InterpFrame.kind and
 * InterpreterRecord.kind; 0 is no interpreter. */
enum sonde_interp_kind {
	SONDE_INTERP_NONE = 0,
	SONDE_INTERP_CPYTHON = 1, /* bpf/cpython.h, bpf/cpython_walk.h */
	SONDE_INTERP_HOTSPOT = 2, /* the HotSpot JVM */
	SONDE_INTERP_V8 = 3,      /* V8 (Node.js) */
	SONDE_INTERP_RUBY = 4,    /* MRI Ruby (YARV) */
	SONDE_INTERP_PHP = 5,     /* PHP's Zend VM */
	SONDE_INTERP_PERL = 6,    /* Perl 5 */
	SONDE_INTERP_KINDS,       /* one past the last kind */
};

/* A runtime's config bytes (its offsets table) fit here. */
#define SONDE_INTERP_CONFIG_MAX 64

/* The value of the per-tgid map interp_procs: which walker runs for the
 * process, where its runtime's root structure is, and the walker's config
 * (config_len bytes of the kind's layout, the rest zero). */
struct sonde_interp_proc {
	__u64 runtime_addr;
	__u8 config[SONDE_INTERP_CONFIG_MAX];
	__u32 kind; /* enum sonde_interp_kind */
	__u32 config_len;
};
_Static_assert(sizeof(struct sonde_interp_proc) == 80, "sonde_interp_proc layout");

/* JIT frames (docs/interpreters.md, "JIT frames"): a kind whose frames
 * live in JIT code walks them inside the native walk. Its per-sample state
 * (the code ranges it claims, the frames found so far) is kept in the
 * per-CPU scratch; each frame it finds is SONDE_INTERP_JIT_WORDS words,
 * the first of which carries in its top byte the index (+ 1) of the
 * native frame it stands for (0: none), the rest being the kind's. */
#define SONDE_INTERP_JIT_RANGES 4
#define SONDE_INTERP_JIT_WORDS 2
#define SONDE_INTERP_JIT_MAX_FRAMES 64
#define SONDE_INTERP_JIT_POS_SHIFT 56
#define SONDE_INTERP_JIT_KIND_MASK ((1ull << SONDE_INTERP_JIT_POS_SHIFT) - 1)
/* Word 0 of a JIT frame: native frame index + 1 (0: none) over the kind's bits. */
#define SONDE_INTERP_JIT_WORD0(native_plus_1, bits)                                        \
	(((__u64)(native_plus_1) << SONDE_INTERP_JIT_POS_SHIFT) |                          \
	 ((__u64)(bits) & SONDE_INTERP_JIT_KIND_MASK))
/* The native index + 1 a JIT frame's word 0 carries; 0: none. */
#define SONDE_INTERP_JIT_POS(word0) ((__u32)((word0) >> SONDE_INTERP_JIT_POS_SHIFT))

/* One walk's JIT state (per-CPU scratch; BPF only, but fixed-width). */
struct sonde_interp_jit {
	__u32 kind; /* the walk's JIT kind; 0: none */
	__u32 n;    /* words buffered in words[] */
	__u16 anon; /* the kind also claims frames without an unwind table */
	__u16 slot; /* the scratch entry of the walk (SCRATCH_*): a kind's own
		     * per-CPU state is kept per entry too, since a perf event
		     * may interrupt a tracepoint program's walk */
	__u32 n_ranges;
	__u64 lo[SONDE_INTERP_JIT_RANGES], hi[SONDE_INTERP_JIT_RANGES]; /* pc in [lo, hi) */
	__u64 words[SONDE_INTERP_JIT_MAX_FRAMES * SONDE_INTERP_JIT_WORDS];
};

/* SONDE_REC_INTERP on the ring: a header, then len bytes the walker
 * copied from the target (a CPython code object's metadata, ...). The
 * sensor forwards them as they are; only the symbolizer decodes them. */
#define SONDE_INTERP_REC_MAX 2048 /* bytes after the header */
struct sonde_interp_rec {
	__u32 type; /* SONDE_REC_INTERP */
	__u32 pid;  /* tgid */
	__u32 kind; /* enum sonde_interp_kind */
	__u32 len;  /* bytes after the header */
};
_Static_assert(sizeof(struct sonde_interp_rec) == 16, "sonde_interp_rec layout");

#ifndef __VMLINUX_H__
/* How the sensor checks a config of one kind before it reaches BPF
 * (sensor/validate.c; user space only, so a pointer is fine here). Each
 * field is a little-endian integer of the config; a kind lists every byte
 * of its layout (padding as a field that must be 0). */
enum sonde_interp_rule {
	SONDE_INTERP_RANGE = 0, /* min <= value <= max */
	SONDE_INTERP_BITS,      /* value & ~max == 0: only known flags */
	SONDE_INTERP_ROOT,      /* a range, and also the walker's read at runtime_offset +
				 * value (8 bytes, or the field's span) lies inside the
				 * file's image */
};

struct sonde_interp_field {
	__u16 offset; /* in the config */
	__u8 size;    /* 1, 2 or 4 */
	__u8 rule;    /* enum sonde_interp_rule */
	__u32 min, max;
	const char *why; /* the refusal's reason when the field is out of bounds */
	/* SONDE_INTERP_ROOT: the bytes the walker reads at runtime_offset +
	 * value, at most (0: one word, 8). */
	__u32 span;
};

struct sonde_interp_limits {
	__u32 kind;           /* enum sonde_interp_kind */
	__u32 format_version; /* the only one accepted */
	__u32 config_size;    /* exactly; at most SONDE_INTERP_CONFIG_MAX */
	/* runtime_offset (a global in the file's data) at most the file's
	 * size plus this: the data segment's address may sit up to one
	 * p_align past its file offset, and the sensor parses no ELF. */
	__u32 image_slack;
	__u32 n_fields;
	const struct sonde_interp_field *fields;
};
#endif
