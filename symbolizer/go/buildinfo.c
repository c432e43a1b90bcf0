/* buildinfo.c - the Go version in .go.buildinfo (see buildinfo.h).
 *
 * Layout (Go 1.18+, flags bit 1 set): the 14-byte magic "\xff Go buildinf:",
 * pointer size, flags, padding to 32 bytes, then the version as a uvarint
 * length and its bytes. Older binaries hold pointers to the strings
 * instead (symbolizer/probes/go_plan.c follows them through the PT_LOADs).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "buildinfo.h"

int go_buildinfo_version(const uint8_t *sec, size_t size, char *ver, size_t cap)
{
	static const char magic[14] = "\xff Go buildinf:";
	uint64_t len = 0;
	size_t at = 32;
	int shift = 0;

	if (size < 33 || memcmp(sec, magic, sizeof(magic)) != 0)
		return -EBADMSG;
	if (!(sec[15] & 0x2))
		return -EBADMSG; /* pointers to strings: Go before 1.18 */
	/* A uvarint length, then the version string. */
	for (;;) {
		if (at >= size || shift > 63)
			return -EBADMSG;
		len |= (uint64_t)(sec[at] & 0x7f) << shift;
		if (!(sec[at++] & 0x80))
			break;
		shift += 7;
	}
	if (len > size - at)
		return -EBADMSG;
	return go_version_copy(sec + at, len, ver, cap);
}

int go_version_copy(const uint8_t *src, uint64_t len, char *ver, size_t cap)
{
	if (len == 0 || len >= cap)
		return -EBADMSG;
	memcpy(ver, src, len);
	ver[len] = '\0';
	for (size_t i = 0; i < len; i++)
		if (ver[i] < 0x21 || ver[i] > 0x7e)
			return -EBADMSG;
	return 0;
}

bool go_version_number(const char *ver, unsigned *major, unsigned *minor)
{
	return sscanf(ver, "go%u.%u", major, minor) == 2;
}

int go_version_minor(const char *ver)
{
	unsigned major = 0, minor = 0;

	if (!go_version_number(ver, &major, &minor) || major != 1 || minor > 1000)
		return -1;
	return (int)minor;
}

uint32_t go_m_curg_offset(const char *ver)
{
	int minor = go_version_minor(ver);

	return minor >= 19 && minor <= 23 ? 192 : 0;
}

uint32_t go_asmcgocall_g_slot(const char *ver)
{
	int minor = go_version_minor(ver);

	if (minor >= 19 && minor <= 21)
		return 48;
	return minor >= 22 && minor <= 23 ? 8 : 0;
}
