/* interp_ops.h - interpreters as an ops table (docs/interpreters.md): one
 * entry per runtime, each in its own folder (cpython/), found by the kind
 * number BPF, the wire and the cache share (bpf/interp.h). An entry
 * recognises the runtime's files and analyses one into per-file Data
 * (the Loader, interp_loader.h), builds the BPF walker's config from the
 * Data, keeps per-session state from the records the walker sent (the
 * Instance), names the frames the walker captured, and says which native
 * frame a run of them replaces. Nothing outside symbolizer/interp/ names a
 * runtime: ingest and the exports call these by kind.
 *
 * Frames and records come from sampled processes through the sensor:
 * untrusted. Every entry checks what it decodes and names what it cannot
 * decode with its unknown_frame text, never a guess.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "file_image.h"
#include "interp_loader.h"

/* Words of one interpreter frame (sonde.v1.InterpFrame.words). */
#define INTERP_FRAME_WORDS 2
/* Interpreter frames of one stack (the symbolizer's per-stack bound). */
#define INTERP_MAX_FRAMES 256

/* One interpreter frame as BPF captured it, leaf first in a stack. */
struct interp_frame {
	uint32_t kind; /* enum sonde_interp_kind */
	uint8_t n_words;
	uint64_t words[INTERP_FRAME_WORDS]; /* beyond n_words: 0 */
};

/* What goes into an InterpreterConfig: the walker's config bytes. */
#define INTERP_CONFIG_MAX 64 /* SONDE_INTERP_CONFIG_MAX */
struct interp_config {
	uint32_t kind, format_version;
	uint64_t runtime_offset;
	uint8_t layout[INTERP_CONFIG_MAX];
	size_t layout_len;
};

struct interp_ops {
	uint32_t kind;             /* enum sonde_interp_kind */
	const char *name;          /* for logs: "CPython" */
	/* The native function each run of interpreter frames replaces
	 * (interp_splice()); NULL: the frames go on top of the native ones. */
	const char *splice_symbol;
	/* A JIT kind (docs/interpreters.md, "JIT frames"): its frames carry
	 * the native frame each stands for in word 0 (SONDE_INTERP_JIT_POS)
	 * and replace that frame; frames without one are spliced as below. */
	bool jit;
	/* Whether path names a file of this runtime. */
	bool (*wants)(const char *path);
	/* Optional: as interp_loader_need() (NULL: the symbols suffice). */
	int (*need)(const struct file_image *img, struct elf_need *need);
	/* The Loader: as interp_loader_analyse(). */
	int (*analyse)(const struct file_image *img, const char *path, struct interp_data *ret,
		       const char **reason);
	/* The walker's config for Data d: 0, or -EPROTONOSUPPORT (no layout
	 * for d's version). */
	int (*config)(const struct interp_data *d, struct interp_config *ret);
	/* The Instance: per-session state from records. new() returns NULL
	 * on ENOMEM; free() accepts NULL. */
	void *(*instance_new)(void);
	void (*instance_free)(void *inst);
	/* Keeps a record pid's walker sent (borrowed bytes): 0, -EBADMSG
	 * (damaged, refused) or -ENOMEM. */
	int (*record_put)(void *inst, uint32_t pid, const void *data, size_t len);
	/* Whether f is the last frame of its run (leaf first): the first
	 * frame a native call of the interpreter ran. */
	bool (*frame_ends_run)(const struct interp_frame *f);
	/* Optional (NULL: every frame is itself): the frames f stands for,
	 * leaf first, into out (room for max >= 1), from inst (NULL: no
	 * records yet); more than one when f's code inlined other functions.
	 * The frames written carry f's kind and native position (word 0's
	 * top byte). Returns how many it wrote (>= 1). */
	uint32_t (*frame_expand)(const void *inst, uint32_t pid, const struct interp_frame *f,
				 struct interp_frame *out, uint32_t max);
	/* f's name into buf (len > 0; always NUL-terminated), from inst
	 * (NULL: no records yet); the runtime's unknown-frame text when it
	 * cannot tell. Returns the length written. */
	size_t (*frame_name)(const void *inst, uint32_t pid, const struct interp_frame *f, char *buf,
			     size_t len);
	/* Optional (NULL: a frame's name is all there is): f's system name,
	 * the runtime's own name of the function where it says more than
	 * frame_name (a JVM method with its descriptor), into buf as
	 * frame_name writes, made valid UTF-8 alike. Returns the length
	 * written; 0 (buf "") when it cannot tell. */
	size_t (*frame_system_name)(const void *inst, uint32_t pid, const struct interp_frame *f,
				    char *buf, size_t len);
};

/* The entry of kind, or NULL for an unknown kind. Static. */
const struct interp_ops *interp_ops_of(uint32_t kind);
/* The entry whose runtime wants path, or NULL. Static. */
const struct interp_ops *interp_ops_for_path(const char *path);

/* The frame type an export gives frames of kind ("cpython"), or NULL for
 * an unknown kind. Static. */
const char *interp_kind_name(uint32_t kind);

/* Bit k set: kind k. Every kind this build has an entry for. */
uint32_t interp_kinds_all(void);
/* Parses a comma-separated list of kind names ("cpython,ruby"), "all" or
 * "none" into a mask of kinds. Returns 0, or -EINVAL for an empty item or
 * a name this build has no entry for (*ret_mask untouched). */
int interp_kinds_parse(const char *list, uint32_t *ret_mask);

/* ---- a session's Instances: one per kind, made on its first record ---- */

struct interp_session;

/* NULL on ENOMEM. */
struct interp_session *interp_session_new(void);
void interp_session_free(struct interp_session *s);
/* Keeps a record of kind for pid (data borrowed). Returns 0, -ENOENT
 * (unknown kind: ignored), -EBADMSG (damaged: refused) or -ENOMEM. */
int interp_session_put_record(struct interp_session *s, uint32_t kind, uint32_t pid,
			      const void *data, size_t len);
/* f's name (see interp_ops.frame_name); s may be NULL. "[unknown]" for a
 * kind without an entry. Returns the length written. */
size_t interp_session_frame_name(const struct interp_session *s, uint32_t pid,
				 const struct interp_frame *f, char *buf, size_t len);

/* f's system name (see interp_ops.frame_system_name); s may be NULL.
 * 0 (buf "") for a kind without the op or a frame it cannot tell. */
size_t interp_session_frame_system_name(const struct interp_session *s, uint32_t pid,
					const struct interp_frame *f, char *buf, size_t len);

/* The frames of frames[0..n) as their runtimes expand them
 * (interp_ops.frame_expand: a JIT frame with inlined functions becomes
 * one frame for each), in order, into a new array *ret (owned by the
 * caller, free()) of *ret_n frames, at most INTERP_MAX_FRAMES (frames
 * beyond are left out); s may be NULL. Returns 0, or -ENOMEM (*ret and
 * *ret_n untouched). */
int interp_session_expand(const struct interp_session *s, uint32_t pid,
			  const struct interp_frame *frames, uint32_t n, struct interp_frame **ret,
			  uint32_t *ret_n);

/* ---- the splice ---- */

/* An entry of interp_splice()'s order that is an interpreter frame: the
 * rest of the bits are its index in frames. Others are native indexes. */
#define INTERP_ORDER_FRAME 0x80000000u

/* Where a stack's interpreter frames go among its native ones, root
 * first: syms[i] is the symbol of native frame i (leaf first, NULL when
 * unknown), frames[0..n_frames) the interpreter frames (leaf first, all of
 * frames[0]'s kind). For a JIT kind, the frames whose word 0 names native
 * frame i (SONDE_INTERP_JIT_POS() == i + 1) replace it, root first (more
 * than one: inlined functions). The others are split into runs after each
 * frame that ends one; the root-most native frame named the kind's splice
 * symbol gets the root-most run, and so on; the leaf-most also gets any
 * runs left over. Without such a frame they go on top. n_frames
 * at most INTERP_MAX_FRAMES. Writes at most n_native + n_frames entries
 * to order (room for that many); the spliced native frames are left out. */
void interp_splice(const char *const *syms, uint32_t n_native, const struct interp_frame *frames,
		   uint32_t n_frames, uint32_t *order, uint32_t *n_order);
/* interp_splice() with the entry ops (NULL: none) instead of frames[0]'s
 * kind's (tests). */
void interp_splice_with(const struct interp_ops *ops, const char *const *syms, uint32_t n_native,
			const struct interp_frame *frames, uint32_t n_frames, uint32_t *order,
			uint32_t *n_order);
