/* interp_read.h - what every interpreter walker of sample.bpf.c reads,
 * sends and stores the same way (docs/interpreters.md, "The framework"):
 * a word of the sampled process's memory, a SONDE_REC_INTERP record
 * reserved in the events ring with its header filled, and a frame word
 * stored in the sample. Included by interp_walk.h before the walkers,
 * after sample.bpf.c's events map, struct sonde_sample and count_err().
 */
#pragma once

/* A measurement build (meson -Dbpf_measure=true defines
 * SONDE_HOTSPOT_COUNT_READS; not for use) counts per CPU, in the map
 * hotspot_reads, the reads of target memory made through
 * interp_probe_read() [0]; the HotSpot walker and sample.bpf.c add their
 * counters and phase times (hotspot_walk.h), which
 * tests/bench/jvm_overhead.py prints. */
#ifdef SONDE_HOTSPOT_COUNT_READS
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 48);
	__type(key, __u32);
	__type(value, __u64);
} hotspot_reads SEC(".maps");

/* Adds d to counter what (under 48). */
static __always_inline void interp_measure_add(__u32 what, __u64 d)
{
	__u64 *v = bpf_map_lookup_elem(&hotspot_reads, &what);

	if (v)
		*v += d;
}
#endif

/* bpf_probe_read_user of the sampled process, counted in a measurement
 * build. size is 64 bits so that a bound checked on it stays on the
 * register passed. */
static __always_inline long interp_probe_read(void *dst, __u64 size, const void *src)
{
#ifdef SONDE_HOTSPOT_COUNT_READS
	interp_measure_add(0, 1);
#endif
	return bpf_probe_read_user(dst, size, src);
}

/* The 8 bytes at addr in the sampled process, or 0 when the read fails. */
static __always_inline __u64 interp_read_u64(__u64 addr)
{
	__u64 v = 0;

	if (interp_probe_read(&v, sizeof(v), (const void *)addr))
		return 0;
	return v;
}

/* The 4 bytes at addr, or 0 when the read fails. */
static __always_inline __u32 interp_read_u32(__u64 addr)
{
	__u32 v = 0;

	if (interp_probe_read(&v, sizeof(v), (const void *)addr))
		return 0;
	return v;
}

/* The 2 bytes at addr, or 0 when the read fails. */
static __always_inline __u16 interp_read_u16(__u64 addr)
{
	__u16 v = 0;

	if (interp_probe_read(&v, sizeof(v), (const void *)addr))
		return 0;
	return v;
}

/* A record of size bytes (a constant: struct sonde_interp_rec, then the
 * kind's size - 16 bytes) for process tgid, its header filled; the caller
 * fills the rest and submits it. NULL when the ring is full (counted as
 * SONDE_ERR_RINGBUF_FULL_EVENT). */
static __always_inline void *interp_rec_new(__u32 size, __u32 tgid, __u32 kind)
{
	struct sonde_interp_rec *h = bpf_ringbuf_reserve(&events, size, 0);

	if (!h) {
		count_err(SONDE_ERR_RINGBUF_FULL_EVENT);
		return NULL;
	}
	h->type = SONDE_REC_INTERP;
	h->pid = tgid;
	h->kind = kind;
	h->len = size - sizeof(*h);
	return h;
}

/* Stores word as frame at + n of rec. false (nothing stored) when word is
 * 0 or the sample's frames are full. */
static __always_inline bool interp_frame_put(struct sonde_sample *rec, __u32 at, __u32 n,
					     __u64 word)
{
	/* 64 bits, and past a barrier: the bound checked below is on the
	 * register that indexes (rec is a whole struct sonde_sample to the
	 * verifier: a global function's argument). */
	__u64 idx = (__u64)at + n;

	asm volatile("" : "+r"(idx));
	if (!word || idx >= SONDE_MAX_KERNEL_FRAMES + SONDE_MAX_USER_FRAMES)
		return false;
	rec->frames[idx] = word;
	return true;
}
