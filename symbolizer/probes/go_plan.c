/* go_plan.c - see go_plan.h. */
#include <capstone/capstone.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "elf_section.h"
#include "go_plan.h"
#include "pclntab.h"

#define FUNC_MAX_BYTES (1u << 20)
#define SERVER_FN "net/http.serverHandler.ServeHTTP"
#define CLIENT_FN "net/http.(*Transport).roundTrip"

/* The struct fields the probes read. */
enum field {
	F_REQ_METHOD, F_REQ_URL, F_REQ_HOST, F_REQ_HEADER,
	F_URL_PATH, F_URL_HOST, F_URL_SCHEME,
	F_RESPONSE_STATUS, F_RESP_STATUS_CODE,
	N_FIELDS,
};

static const struct {
	const char *type, *member;
} fields[N_FIELDS] = {
	[F_REQ_METHOD] = { "net/http.Request", "Method" },
	[F_REQ_URL] = { "net/http.Request", "URL" },
	[F_REQ_HOST] = { "net/http.Request", "Host" },
	[F_REQ_HEADER] = { "net/http.Request", "Header" },
	[F_URL_PATH] = { "net/url.URL", "Path" },
	[F_URL_HOST] = { "net/url.URL", "Host" },
	[F_URL_SCHEME] = { "net/url.URL", "Scheme" },
	[F_RESPONSE_STATUS] = { "net/http.response", "status" },
	[F_RESP_STATUS_CODE] = { "net/http.Response", "StatusCode" },
};

/* For binaries without DWARF (-w): the offsets of the Go versions whose
 * DWARF was read on this machine (amd64, Debian's golang-1.19 (go1.19.8)
 * and bookworm-backports' golang-1.21, -1.22 and -1.23 (go1.21.13,
 * go1.22.12, go1.23.5): the nine fields sit at the same offsets in all of
 * them; test_go_plan.py checks this against the DWARF of the installed
 * ones). Other versions without DWARF (1.20 was not read here, 1.24 moved
 * to Swiss-table maps) get no plan. */
static const uint64_t fallback_off[N_FIELDS] = {
	[F_REQ_METHOD] = 0, [F_REQ_URL] = 16, [F_REQ_HOST] = 128,
	[F_REQ_HEADER] = 56, [F_URL_PATH] = 56, [F_URL_HOST] = 40,
	[F_URL_SCHEME] = 0, [F_RESPONSE_STATUS] = 120,
	[F_RESP_STATUS_CODE] = 16,
};
static const char *const fallback_versions[] = {
	"go1.19.", "go1.21.", "go1.22.", "go1.23.",
};
#define N_FALLBACK_VERSIONS (sizeof(fallback_versions) / sizeof(fallback_versions[0]))

/* Go 1.17 introduced the register ABI on amd64: "go1.X..." with X >= 17. */
static bool has_regabi(const char *v)
{
	unsigned major = 0, minor = 0;

	return go_version_number(v, &major, &minor) && (major > 1 || minor >= 17);
}

struct func {
	const char *name;
	uint64_t lo, hi; /* [lo, hi) vaddr; 0: not found */
};

/* The bytes of a section inside the file, or NULL (none, or outside). */
static const uint8_t *section_bytes(const uint8_t *data, size_t size, const GElf_Shdr *sh)
{
	if (sh->sh_type == SHT_NOBITS || sh->sh_offset > size || sh->sh_size > size - sh->sh_offset)
		return NULL;
	return data + sh->sh_offset;
}

static void funcs_from_symtab(Elf *e, struct func *fn, size_t n)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(e, scn))) {
		Elf_Data *d;
		size_t count;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		count = d->d_size / sh.sh_entsize;
		for (size_t i = 0; i < count; i++) {
			GElf_Sym sym;
			const char *name;

			if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC)
				continue;
			name = elf_strptr(e, sh.sh_link, sym.st_name);
			for (size_t k = 0; name && k < n; k++)
				if (!fn[k].lo && !strcmp(name, fn[k].name) && sym.st_size) {
					fn[k].lo = sym.st_value;
					fn[k].hi = sym.st_value + sym.st_size;
				}
		}
	}
}

struct pcln_ctx {
	struct func *fn;
	size_t n;
};

static int pcln_func(void *ctx, uint64_t lo, uint64_t hi, const char *name, size_t len)
{
	struct pcln_ctx *c = ctx;

	for (size_t k = 0; k < c->n; k++)
		if (!c->fn[k].lo && strlen(c->fn[k].name) == len && !memcmp(name, c->fn[k].name, len)) {
			c->fn[k].lo = lo;
			c->fn[k].hi = hi;
		}
	return 0;
}

static int pcln_row(void *ctx, uint64_t a, const char *f, size_t fl, uint32_t l)
{
	(void)ctx, (void)a, (void)f, (void)fl, (void)l;
	return 0;
}

static int pcln_end(void *ctx, uint64_t a)
{
	(void)ctx, (void)a;
	return 0;
}

/* vaddr -> file offset through the PT_LOAD headers; -1 if in none. */
static int64_t file_offset(Elf *e, uint64_t vaddr, uint64_t len)
{
	size_t n = 0;

	if (elf_getphdrnum(e, &n) != 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (vaddr >= ph.p_vaddr && vaddr - ph.p_vaddr < ph.p_filesz &&
		    len <= ph.p_filesz - (vaddr - ph.p_vaddr))
			return (int64_t)(ph.p_offset + (vaddr - ph.p_vaddr));
	}
	return -1;
}

/* Where the entry probe goes: on the stack check's conditional jump when
 * the function starts with Go's stack check (`cmp rsp, 16(r14)`, or for
 * larger frames `lea r12, -N(rsp)` + `cmp r12, 16(r14)`), else on the
 * first byte. The kernel emulates a conditional jump but single-steps a
 * cmp out of line, which costs a second trap: on this project's VMs a hit
 * at the jump took ~5 us against ~18 us at the cmp (docs/go-probes.md).
 * Every register the probes read (arguments, r14, rsp) is the same at
 * the jump as at the entry: only flags and the scratch r12 have changed,
 * and stack growth re-runs the prologue, jump included. Returns the
 * offset from the function's start. */
static uint64_t entry_offset(csh cs, cs_insn *insn, const uint8_t *code, size_t size, uint64_t addr)
{
	const uint64_t start = addr;
	bool cmp_seen = false;

	for (int n = 0; n < 3 && cs_disasm_iter(cs, &code, &size, &addr, insn); n++) {
		const cs_x86 *x = &insn->detail->x86;

		if (insn->id == X86_INS_LEA && x->op_count == 2 && x->operands[0].type == X86_OP_REG &&
		    x->operands[0].reg == X86_REG_R12 && !cmp_seen)
			continue;
		if (insn->id == X86_INS_CMP && x->op_count == 2 && x->operands[0].type == X86_OP_REG &&
		    (x->operands[0].reg == X86_REG_RSP || x->operands[0].reg == X86_REG_R12) &&
		    x->operands[1].type == X86_OP_MEM && x->operands[1].mem.base == X86_REG_R14 &&
		    x->operands[1].mem.disp == 16 && !cmp_seen) {
			cmp_seen = true;
			continue;
		}
		if (cmp_seen && (insn->id == X86_INS_JBE || insn->id == X86_INS_JB))
			return insn->address - start;
		break;
	}
	return 0;
}

/* The entry and every RET of fn as attaches of p. */
static const char *attach_func(Elf *e, const uint8_t *data, size_t size, const struct func *fn,
			       const char *enter, const char *ret, struct go_plan_probe *p)
{
	int64_t off = fn->lo ? file_offset(e, fn->lo, fn->hi - fn->lo) : -1;
	const uint8_t *code;
	size_t code_size;
	uint64_t addr, entry;
	csh cs;
	cs_insn *insn;

	if (!fn->lo)
		return "function not found (neither .symtab nor .gopclntab has it)";
	if (fn->hi <= fn->lo || fn->hi - fn->lo > FUNC_MAX_BYTES || off < 0 ||
	    (uint64_t)off + (fn->hi - fn->lo) > size)
		return "function bytes outside the file";
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return "capstone unavailable";
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	insn = cs_malloc(cs);
	if (!insn) {
		cs_close(&cs);
		return "out of memory";
	}
	code = data + off;
	code_size = fn->hi - fn->lo;
	addr = fn->lo;
	entry = entry_offset(cs, insn, code, code_size, addr);
	p->attach[0].program = enter;
	p->attach[0].file_offset = (uint64_t)off + entry;
	if (entry)
		snprintf(p->attach[0].symbol, sizeof(p->attach[0].symbol), "%s+0x%llx", fn->name,
			 (unsigned long long)entry);
	else
		snprintf(p->attach[0].symbol, sizeof(p->attach[0].symbol), "%s", fn->name);
	p->n_attach = 1;
	while (code_size > 0) {
		const uint8_t *at = code;

		if (!cs_disasm_iter(cs, &code, &code_size, &addr, insn)) {
			/* Undecodable byte (padding, data): step over it. */
			code++;
			code_size--;
			addr++;
			continue;
		}
		if (insn->id != X86_INS_RET)
			continue;
		if (p->n_attach == GO_PLAN_MAX_ATTACH) {
			cs_free(insn, 1);
			cs_close(&cs);
			return "more RET instructions than the plan holds";
		}
		p->attach[p->n_attach].program = ret;
		p->attach[p->n_attach].file_offset = (uint64_t)off + (uint64_t)(at - (data + off));
		snprintf(p->attach[p->n_attach].symbol, sizeof(p->attach[0].symbol), "%s+0x%llx",
			 fn->name, (unsigned long long)(insn->address - fn->lo));
		p->n_attach++;
	}
	cs_free(insn, 1);
	cs_close(&cs);
	return p->n_attach > 1 ? NULL : "no RET instruction in the function";
}

/* Field offsets from the DWARF. Returns the number found. */
static size_t dwarf_fields(Elf *e, uint64_t off[N_FIELDS], bool have[N_FIELDS])
{
	Dwarf *dw = dwarf_begin_elf(e, DWARF_C_READ, NULL);
	Dwarf_Off cu = 0, next;
	size_t hsize, found = 0;

	if (!dw)
		return 0;
	while (found < N_FIELDS && dwarf_nextcu(dw, cu, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cudie, die;
		int r;

		if (!dwarf_offdie(dw, cu + hsize, &cudie) || dwarf_child(&cudie, &die) != 0) {
			cu = next;
			continue;
		}
		do {
			const char *name;
			Dwarf_Die m;

			if (dwarf_tag(&die) != DW_TAG_structure_type || !(name = dwarf_diename(&die)))
				continue;
			for (int f = 0; f < N_FIELDS; f++) {
				if (have[f] || strcmp(name, fields[f].type))
					continue;
				if (dwarf_child(&die, &m) != 0)
					continue;
				do {
					Dwarf_Attribute at;
					Dwarf_Word w;
					const char *mn = dwarf_diename(&m);

					if (dwarf_tag(&m) == DW_TAG_member && mn &&
					    !strcmp(mn, fields[f].member) &&
					    dwarf_attr(&m, DW_AT_data_member_location, &at) &&
					    dwarf_formudata(&at, &w) == 0) {
						off[f] = w;
						have[f] = true;
						found++;
						break;
					}
				} while (dwarf_siblingof(&m, &m) == 0);
			}
		} while ((r = dwarf_siblingof(&die, &die)) == 0);
		cu = next;
	}
	dwarf_end(dw);
	return found;
}

static void add_const(struct go_plan_probe *p, const char *name, uint64_t v)
{
	p->consts[p->n_consts].name = name;
	p->consts[p->n_consts].value = v;
	p->n_consts++;
}

/* Before Go 1.18, .go.buildinfo holds (after the 16-byte header) a pointer
 * to the version's string header {data, len} instead of the string. Only
 * 8-byte little-endian pointers; each read goes through the PT_LOADs. */
static int buildinfo_version_by_pointer(Elf *e, const uint8_t *data, size_t size, const uint8_t *bi,
					size_t bi_size, char *ver, size_t cap)
{
	uint64_t hdr, str, len;
	int64_t off;

	if (bi_size < 24 || memcmp(bi, "\xff Go buildinf:", 14) != 0 || bi[14] != 8 ||
	    (bi[15] & 0x3) != 0)
		return -EBADMSG;
	memcpy(&hdr, bi + 16, 8);
	off = file_offset(e, hdr, 16);
	if (off < 0 || size < 16 || (uint64_t)off > size - 16)
		return -EBADMSG;
	memcpy(&str, data + off, 8);
	memcpy(&len, data + off + 8, 8);
	if (len == 0 || len >= cap)
		return -EBADMSG;
	off = file_offset(e, str, len);
	if (off < 0 || size < len || (uint64_t)off > size - len)
		return -EBADMSG;
	return go_version_copy(data + off, len, ver, cap);
}

/* Whether header_lookup applies: the classic hash map of Go < 1.24. */
static bool classic_maps(const char *v)
{
	unsigned major = 0, minor = 0;

	return go_version_number(v, &major, &minor) && major == 1 && minor < 24;
}

int go_plan_build(uint8_t *data, size_t size, struct go_plan *out)
{
	struct func fn[2] = { { SERVER_FN, 0, 0 }, { CLIENT_FN, 0, 0 } };
	uint64_t off[N_FIELDS] = { 0 };
	bool have[N_FIELDS] = { false };
	const uint8_t *bi;
	size_t shstrndx;
	GElf_Shdr sh;
	Elf_Scn *scn;
	Elf *e = NULL;
	int r = 0;

	memset(out, 0, sizeof(*out));
	elf_version(EV_CURRENT);
	/* libelf converts foreign byte orders in place: native files only. */
	if (size < EI_NIDENT || memcmp(data, ELFMAG, SELFMAG) || data[EI_CLASS] != ELFCLASS64 ||
	    data[EI_DATA] != ELFDATA2LSB) {
		r = -EBADMSG;
		goto cleanup;
	}
	e = elf_memory((char *)data, size);
	if (!e || elf_kind(e) != ELF_K_ELF || elf_getshdrstrndx(e, &shstrndx) != 0) {
		r = -EBADMSG;
		goto cleanup;
	}
	scn = elf_section_by_name(e, ".go.buildinfo", &sh);
	bi = scn ? section_bytes(data, size, &sh) : NULL;
	if (!bi) {
		r = -ENOENT;
		goto cleanup;
	}
	if (go_buildinfo_version(bi, sh.sh_size, out->go_version, sizeof(out->go_version)) < 0 &&
	    buildinfo_version_by_pointer(e, data, size, bi, sh.sh_size, out->go_version,
					 sizeof(out->go_version)) < 0) {
		out->go_version[0] = '\0';
		out->error = "a damaged .go.buildinfo (no Go version in it)";
		goto cleanup;
	}
	if (!has_regabi(out->go_version)) {
		out->error = "a Go binary without the register ABI (before 1.17)";
		goto cleanup;
	}
	funcs_from_symtab(e, fn, 2);
	if (!fn[0].lo || !fn[1].lo) {
		struct elf_go_table tab;
		struct pcln_ctx c = { fn, 2 };
		struct pclntab_sink sink = { .func = pcln_func, .row = pcln_row, .end = pcln_end,
					     .ctx = &c };

		if (elf_go_table(e, &tab))
			pclntab_read(tab.data, tab.size, tab.text, &sink);
	}
	if (dwarf_fields(e, off, have) == N_FIELDS) {
		out->offsets_from = "dwarf";
	} else {
		size_t i;

		for (i = 0; i < N_FALLBACK_VERSIONS; i++)
			if (!strncmp(out->go_version, fallback_versions[i],
				     strlen(fallback_versions[i])))
				break;
		if (i == N_FALLBACK_VERSIONS) {
			out->error = "no DWARF for the struct offsets, and a Go version the offset table does not have";
			goto cleanup;
		}
		memcpy(off, fallback_off, sizeof(off));
		out->offsets_from = "table";
	}
	{
		struct go_plan_probe *p = &out->probes[out->n_probes++];

		p->probe = "go_http_server";
		add_const(p, "req_method_off", off[F_REQ_METHOD]);
		add_const(p, "req_url_off", off[F_REQ_URL]);
		add_const(p, "req_host_off", off[F_REQ_HOST]);
		add_const(p, "req_header_off", off[F_REQ_HEADER]);
		add_const(p, "url_path_off", off[F_URL_PATH]);
		add_const(p, "response_status_off", off[F_RESPONSE_STATUS]);
		add_const(p, "header_lookup", classic_maps(out->go_version));
		p->error = attach_func(e, data, size, &fn[0], "server_enter", "server_return", p);
	}
	{
		struct go_plan_probe *p = &out->probes[out->n_probes++];

		p->probe = "go_http_client";
		add_const(p, "req_method_off", off[F_REQ_METHOD]);
		add_const(p, "req_url_off", off[F_REQ_URL]);
		add_const(p, "req_host_off", off[F_REQ_HOST]);
		add_const(p, "url_path_off", off[F_URL_PATH]);
		add_const(p, "url_host_off", off[F_URL_HOST]);
		add_const(p, "url_scheme_off", off[F_URL_SCHEME]);
		add_const(p, "resp_status_code_off", off[F_RESP_STATUS_CODE]);
		p->error = attach_func(e, data, size, &fn[1], "client_enter", "client_return", p);
	}
cleanup:
	if (e)
		elf_end(e);
	return r;
}
