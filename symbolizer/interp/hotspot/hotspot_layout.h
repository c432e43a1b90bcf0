/* hotspot_layout.h - the HotSpot walker's config (bpf/hotspot.h), made
 * from the structure tables of one libjvm.so file (hotspot_vmstructs.h):
 * the offsets of the fields BPF follows (CodeCache -> CodeHeap -> blob;
 * Method -> ConstMethod -> ConstantPool -> Klass -> Symbol), the sizes of
 * the types whose data follows them, and the JDK release. The x86-64
 * interpreter frame slots that the tables do not export (Method*, bcp)
 * are placed from the ones they do (frame::interpreter_frame_last_sp_offset)
 * by frame_x86.hpp's order (checked on JDK 11, 17 and 21: the bcis give
 * JFR's lines). Where releases name a field otherwise (JDK 11's
 * GenericGrowableArray and InstanceKlass source file index, JDK 21's
 * ConstMethodFlags), each release's name is asked for.
 */
#pragma once

#include <stdint.h>

#include "elf_analysis.h"
#include "file_image.h"
#include "hotspot.h" /* bpf/ */

struct hotspot_layout {
	unsigned major; /* the JDK feature release: 17 */
	/* The lowest of the CodeCache statics the walker reads (its config's
	 * *_static fields are from here), in the file-offset coordinates of
	 * the first executable load segment (interp_data.runtime_offset). */
	uint64_t root_offset;
	struct sonde_hotspot_offsets off;
};

/* The ranges hotspot_layout_read() needs, as hotspot_vm_need(). */
int hotspot_layout_need(const struct file_image *img, struct elf_need *need, const char **reason);

/* Reads img's layout. Returns 0, -ENOENT (not a HotSpot JVM),
 * -EPROTONOSUPPORT (a release outside 11..21, a field the walker needs not
 * in the tables, or a value outside the sensor's limits), -EBADMSG or
 * -ENOMEM; *reason (static) says why. */
int hotspot_layout_read(const struct file_image *img, struct hotspot_layout *ret,
			const char **reason);
