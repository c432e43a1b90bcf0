/* maps.h - strict parsing of one /proc/PID/maps line. Pure: no I/O, so the
 * unit tests replay lines. The text is kernel output, but the path part is
 * a file name a target chose, so it is bounded and kept opaque. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MAPS_PATH_MAX 4096

struct maps_line {
	uint64_t start;
	uint64_t end;
	uint64_t offset; /* page offset in the file */
	uint32_t dev_major;
	uint32_t dev_minor;
	uint64_t inode;
	bool readable, writable, executable, shared;
	bool deleted; /* the path ended in " (deleted)", which is stripped */
	char path[MAPS_PATH_MAX]; /* "" for anonymous; "[vdso]" etc. as is */
};

/* Parses one line (without or with its trailing '\n'; len bytes, no NUL
 * needed). Returns 0, or -EINVAL for anything that is not exactly
 * "START-END PERMS OFFSET MAJ:MIN INODE [PATH]", -ENAMETOOLONG for a path
 * over MAPS_PATH_MAX - 1. *ret is untouched on failure. */
int maps_parse_line(const char *line, size_t len, struct maps_line *ret);

/* True for a mapping of a file (path starts with '/') with execute
 * permission: the mappings whose addresses user frames can hit. */
bool maps_line_is_exec_file(const struct maps_line *l);

/* Reads field 4 (ppid) and 22 (start time in clock ticks) of a
 * /proc/PID/stat text, parsing from the last ')' so that a comm with spaces
 * or parentheses cannot shift the fields. Returns 0 or -EINVAL. */
int proc_parse_stat(const char *text, size_t len, uint32_t *ret_ppid, uint64_t *ret_start);

/* The owner of a process from a /proc/PID/status text: the "Uid:" and
 * "Gid:" lines' four ids each (real, effective, saved, file-system).
 * *ret_uid is the uid when the four uids are equal and the four gids are
 * equal, else 0: a process in the middle of a uid or gid change (a setuid
 * or setgid program) belongs to root only, as ptrace_may_access() judges
 * it. Returns 0, or -EINVAL when either line is missing or malformed
 * (*ret_uid untouched). */
int proc_parse_status_uid(const char *text, size_t len, uint32_t *ret_uid);
