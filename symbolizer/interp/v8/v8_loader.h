/* v8_loader.h - V8's Loader (docs/interpreters.md, "V8"): reads the
 * post-mortem constants V8 builds into the binary (the v8dbg_* symbols of
 * node or libnode, in .dynsym, whose values are 4-byte integers in the
 * file's data) and the embedded builtins' place (the .symtab symbols
 * v8_Default_embedded_blob_code_ and _size_) into the walker's config
 * (bpf/v8.h's struct sonde_v8_offsets).
 *
 * The file comes from a sensor: untrusted. Every read is bounded by the
 * section sizes, the symbol count cap and the image, and every value is
 * checked against the same bounds the sensor applies (bpf/v8.h).
 */
#pragma once

#include <stdbool.h>

#include "elf_analysis.h"
#include "file_image.h"
#include "interp_loader.h"
#include "v8.h"

/* Whether path's basename is node or libnode.so*. */
bool v8_loader_wants(const char *path);

/* The ranges of img v8_loader_analyse() still needs: the symbol tables,
 * then the bytes of every constant it reads. 0 (all there), -EAGAIN
 * (*need filled), -EBADMSG (no valid ELF: analyse says why). */
int v8_loader_need(const struct file_image *img, struct elf_need *need);

/* The Data of img: kind V8, runtime_offset the embedded code's start (in
 * the executable segment's file coordinates), data the config bytes.
 * Returns 0, -ENOENT (no v8dbg constants: not V8), -EPROTONOSUPPORT (a V8
 * this walker cannot read: pointer compression, 32-bit Smis, a missing
 * constant, no .symtab) or -EBADMSG; *reason (static) says why. */
int v8_loader_analyse(const struct file_image *img, struct interp_data *ret, const char **reason);
