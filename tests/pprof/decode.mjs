// decode.mjs FILE.pb.gz - decodes a gzipped pprof profile with the npm
// package pprof-format (a decoder sonde did not write) and prints it as
// JSON with every string index resolved, for tests/integration/test_pprof.py.
import { readFileSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import { Profile } from "pprof-format";

const num = (v) => (typeof v === "bigint" ? Number(v) : v ?? 0);

const gz = readFileSync(process.argv[2]);
if (gz[0] !== 0x1f || gz[1] !== 0x8b) throw new Error("not gzip");
const p = Profile.decode(gunzipSync(gz));
const str = (i) => {
  const s = p.stringTable.strings[num(i)];
  if (s === undefined) throw new Error(`string index ${i} out of range`);
  return s;
};
const byId = (table, what) => {
  const m = new Map();
  for (const x of table) {
    const id = num(x.id);
    if (id === 0 || m.has(id)) throw new Error(`${what} id ${id} zero or repeated`);
    m.set(id, x);
  }
  return m;
};
const functions = byId(p.function, "function");
const locations = byId(p.location, "location");
const mappings = byId(p.mapping, "mapping");

const fn = (id) => {
  const f = functions.get(num(id));
  if (!f) throw new Error(`no function ${id}`);
  return { name: str(f.name), system_name: str(f.systemName), file: str(f.filename) };
};
const loc = (id) => {
  const l = locations.get(num(id));
  if (!l) throw new Error(`no location ${id}`);
  const mid = num(l.mappingId);
  if (mid && !mappings.has(mid)) throw new Error(`no mapping ${mid}`);
  return {
    mapping: mid,
    address: "0x" + BigInt(l.address).toString(16),
    lines: l.line.map((ln) => ({ ...fn(ln.functionId), line: num(ln.line) })),
  };
};

const out = {
  sample_types: p.sampleType.map((t) => [str(t.type), str(t.unit)]),
  period_type: p.periodType ? [str(p.periodType.type), str(p.periodType.unit)] : null,
  period: num(p.period),
  time_nanos: num(p.timeNanos),
  duration_nanos: num(p.durationNanos),
  default_sample_type: str(p.defaultSampleType),
  mappings: p.mapping.map((m) => ({
    id: num(m.id), filename: str(m.filename), build_id: str(m.buildId),
    memory_start: num(m.memoryStart), memory_limit: num(m.memoryLimit),
    has_functions: !!m.hasFunctions, has_line_numbers: !!m.hasLineNumbers,
  })),
  functions: p.function.map((f) => fn(f.id)),
  samples: p.sample.map((s) => ({
    values: s.value.map(num),
    labels: Object.fromEntries(s.label.map((l) => [str(l.key), num(l.str) ? str(l.str) : num(l.num)])),
    locations: s.locationId.map(loc), // leaf first
  })),
};
process.stdout.write(JSON.stringify(out));
