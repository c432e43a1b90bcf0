/* interp_span.h - what lets an interpreter walker read less
 * (docs/interpreters.md, "The framework"). A probe read costs about the
 * same for a few hundred bytes as for 8 (the helper call and the
 * user-access checks, not the copy): so a walker reads the span of a
 * structure (or of an array of them) that holds the fields it needs in
 * one read into the scratch's `span`, and takes the fields from the copy;
 * a field a config places outside the span read is read on its own, so
 * any offset within the kind's limits still works, only slower. And a
 * per-CPU memo of the records the last walks sent (below). Included by
 * sample.bpf.c before struct unwind_scratch, which holds both; the
 * walkers' other shared helpers are in interp_read.h.
 */
#pragma once

#define INTERP_SPAN_BYTES 1024 /* a power of two: offsets into it are masked */
#define INTERP_SPAN_SLACK 8    /* an 8-byte access at a masked offset stays inside */

/* Reads len bytes at addr into span (the scratch's, INTERP_SPAN_BYTES +
 * INTERP_SPAN_SLACK bytes). Returns len, or 0 when len is over
 * INTERP_SPAN_BYTES or the read failed (span then zeroed). */
static __always_inline __u32 interp_span_read(__u8 *span, __u64 addr, __u32 len)
{
	__u64 n = len;

	/* The bound is checked on the register passed (the barrier keeps
	 * the compiler from checking a copy). */
	asm volatile("" : "+r"(n));
	if (n > INTERP_SPAN_BYTES)
		return 0;
	if (bpf_probe_read_user(span, n, (const void *)addr))
		return 0;
	return (__u32)n;
}

/* The size-byte (1, 4 or 8) little-endian field at base + off: from span
 * when the n bytes read there from base hold it, else read alone (0 when
 * that fails). The 8-byte load may be unaligned: the verifier allows it
 * for map values without BPF_F_STRICT_ALIGNMENT, and x86-64, the one
 * architecture built, does it in hardware. */
static __always_inline __u64 interp_span_field(const __u8 *span, __u32 n, __u64 base, __u32 off,
					       __u32 size)
{
	__u64 v = 0;

	if ((__u64)off + size <= n) {
		v = *(const __u64 *)(span + (off & (INTERP_SPAN_BYTES - 1)));
	} else if (bpf_probe_read_user(&v, size, (const void *)(base + off))) {
		return 0;
	}
	if (size == 1)
		return v & 0xff;
	if (size == 4)
		return v & 0xffffffffull;
	return v;
}

/* The per-CPU memo of what the last walks on this CPU found at each
 * position of the interpreter stack, and whose record they sent: a frame
 * found where the last walk found it needs no lookup in the kind's
 * "already sent" map (an LRU hash whose lookup, a cache miss or two on a
 * busy machine, cost more than the rest of a frame). Valid only in the
 * generation of interp_conn_gen it was stored in: the sensor adds 1 after
 * emptying those maps for a new connection, so records go out again.
 * `val` is the walker's: the checksum it compares, or when it last
 * checked one. */
#define INTERP_SEEN_SLOTS 64 /* a power of two, at least every walker's frame limit */

struct interp_seen_slot {
	__u64 tag; /* what names the frame, as the kind's map key holds it */
	__u64 val;
	__u32 tgid;
	__u32 gen;
};

/* The slot of position i (the frame's index in its walk). */
static __always_inline struct interp_seen_slot *interp_seen_at(struct interp_seen_slot *slots,
								__u32 i)
{
	return &slots[i & (INTERP_SEEN_SLOTS - 1)];
}

/* Whether e holds (tgid, tag), stored in generation gen. */
static __always_inline bool interp_seen_match(const struct interp_seen_slot *e, __u32 tgid,
					      __u64 tag, __u32 gen)
{
	return e->tag == tag && e->tgid == tgid && e->gen == gen;
}

static __always_inline void interp_seen_store(struct interp_seen_slot *e, __u32 tgid, __u64 tag,
					      __u32 gen, __u64 val)
{
	e->tag = tag;
	e->val = val;
	e->tgid = tgid;
	e->gen = gen;
}
