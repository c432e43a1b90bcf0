#!/usr/bin/python3
"""sonde's proto/otlp against the official opentelemetry-proto files at two
tagged releases: the one this machine has installed (Debian's
opentelemetry-proto package, bookworm-backports: tag v1.5.0, under
/usr/include/opentelemetry/proto), and the one sonde's default layout
follows (Debian sid's package, v1.11.0, unpacked by
tests/workload/fetch-otlp-proto into $SONDE_OTLP_PROTO, else its default
directory).

Against the sid release, every message and service of proto/otlp but the
v1.5.0 copy is checked whole: every field sonde declares must have the
official number, name, type, label, message type and presence. When that
release is not unpacked (tests/run unpacks it first) this part is reported
as not checked. Against v1.5.0:

Both are compiled by protoc into descriptor sets; every field sonde declares
in a message the release checks must have the official number, name, type,
label and message type, every enum value sonde declares the official name. The trace and collector trace packages, resource.v1
and common.v1 are checked whole (v1.10 added only the two fields in
NEWER_THAN_RELEASE); of the profiles packages, the service and method, the
request's resource_profiles field and the ResourceProfiles / ScopeProfiles
envelope, and Link, Line and Function, alike in both. The rest of the
profiles body (ProfilesDictionary, Profile, Sample, ...) is the v1.10/v1.11
layout, which the v1.5.0 release predates (docs/exports.md).

sonde's copy of v1.5.0's own profiles layout (otlp_v150_*.proto, packages
"otlp150." standing for "opentelemetry.proto.") is checked whole: every
message and enum in it must be v1.5.0's, every field it declares with the
official number, name, type, label, message type and presence (the
official "optional" is a one-field oneof in sonde's file: the same wire).

Usage: otlp_layout.py SOURCE_ROOT. Exit 0: all match; 1: a difference
(printed); 77 (meson: skipped): the official files are not installed
(deploy/deps.sh test installs them)."""
import os
import pathlib
import subprocess
import sys
import tempfile

from google.protobuf import descriptor_pb2

OFFICIAL = pathlib.Path("/usr/include")
CURRENT_DIR = pathlib.Path(os.environ.get("SONDE_OTLP_PROTO")
                           or "/var/cache/sonde-tests/opentelemetry-proto-sid")
OFFICIAL_FILES = [
    "opentelemetry/proto/collector/trace/v1/trace_service.proto",
    "opentelemetry/proto/collector/profiles/v1development/profiles_service.proto",
]
P = "opentelemetry.proto."
CHECKED = [P + "common.v1.", P + "resource.v1.", P + "trace.v1.", P + "collector.trace.v1.",
           P + "profiles.v1development.ResourceProfiles", P + "profiles.v1development.ScopeProfiles",
           P + "collector.profiles.v1development.ExportProfilesServiceRequest",
           P + "collector.profiles.v1development.ExportProfilesServiceResponse",
           P + "collector.profiles.v1development.ExportProfilesPartialSuccess",
           P + "profiles.v1development.Link", P + "profiles.v1development.Line",
           P + "profiles.v1development.Function"]
# sonde's package prefix for its copy of v1.5.0's profiles layout.
V150 = "otlp150."
# Profiles-era fields of common.v1 (tag v1.10.0) that v1.5.0 lacks; sonde's
# trace export sets neither.
NEWER_THAN_RELEASE = {(P + "common.v1.AnyValue", 8), (P + "common.v1.KeyValue", 3)}
# The request's body fields whose types changed after v1.5.0.
BODY = {(P + "collector.profiles.v1development.ExportProfilesServiceRequest", 2)}


def official(name):
    """A (type) name of sonde's v1.5.0 copy as the official files spell it."""
    return name.replace("." + V150, "." + P).replace(V150, P, 1) if name.lstrip(".").startswith(V150) \
        else name


def descriptors(include, files):
    with tempfile.TemporaryDirectory() as d:
        out = pathlib.Path(d) / "set.pb"
        subprocess.run(["protoc", f"-I{include}", "--include_imports", f"--descriptor_set_out={out}",
                        *files], check=True)
        fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    msgs, services = {}, {}

    def enums(prefix, types):
        for e in types:
            # An enum is checked as a message whose fields are its values.
            msgs[prefix + e.name] = {v.number: (v.name,) for v in e.value}

    def walk(prefix, types):
        for m in types:
            msgs[prefix + m.name] = {f.number: (f.name, f.type, f.label, official(f.type_name),
                                                f.HasField("oneof_index")) for f in m.field}
            walk(prefix + m.name + ".", m.nested_type)
            enums(prefix + m.name + ".", m.enum_type)
    for f in fds.file:
        # Messages of sonde's v1.5.0 copy are filed under the official name.
        if f.package.startswith(V150):
            f.package = official(f.package)
            walk("v150:" + f.package + ".", f.message_type)
            enums("v150:" + f.package + ".", f.enum_type)
            continue
        walk(f.package + ".", f.message_type)
        enums(f.package + ".", f.enum_type)
        for s in f.service:
            services[f"{f.package}.{s.name}"] = {m.name: (m.input_type, m.output_type) for m in s.method}
    return msgs, services


def check_current(ours, our_services):
    """proto/otlp (but the v1.5.0 copy) whole against the sid release:
    (differences, fields checked, tag), or None when it is not unpacked."""
    include = CURRENT_DIR / "root" / "usr" / "include"
    if not all((include / f).is_file() for f in OFFICIAL_FILES):
        return None
    versions = dict(ln.split(" ", 1) for ln in (CURRENT_DIR / "versions").read_text().splitlines() if ln)
    tag = versions["opentelemetry-proto"].split(":")[-1].split("-")[0]
    theirs, their_services = descriptors(include, OFFICIAL_FILES)
    bad, n = [], 0
    for name, fields in sorted(ours.items()):
        if name.startswith("v150:"):
            continue
        if name not in theirs:
            bad.append(f"{name}: not in official v{tag}")
            continue
        for num, f in sorted(fields.items()):
            n += 1
            if theirs[name].get(num) != f:
                bad.append(f"{name} field {num}: sonde {f}, official v{tag} {theirs[name].get(num)}")
    for svc, methods in sorted(our_services.items()):
        if methods != their_services.get(svc):
            bad.append(f"service {svc}: sonde {methods}, official v{tag} {their_services.get(svc)}")
    return bad, n, tag


def main():
    root = pathlib.Path(sys.argv[1])
    if not all((OFFICIAL / f).is_file() for f in OFFICIAL_FILES):
        print(f"SKIP: the official files ({OFFICIAL}/opentelemetry/proto, Debian's "
              "opentelemetry-proto) are not installed")
        return 77
    tag = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "opentelemetry-proto"],
                         capture_output=True, text=True).stdout.split("-")[0]
    ours, our_services = descriptors(root / "proto" / "otlp",
                                     sorted(p.name for p in (root / "proto" / "otlp").glob("*.proto")))
    theirs, their_services = descriptors(OFFICIAL, OFFICIAL_FILES)
    bad = []
    n = 0
    n_v150 = 0
    for name, fields in sorted(ours.items()):
        if name.startswith("v150:"):
            # sonde's v1.5.0 copy: whole, no exception.
            name = name[len("v150:"):]
            n_v150 += 1
            if name not in theirs:
                bad.append(f"{name} (otlp_v150): not in official v{tag}")
                continue
            for num, f in sorted(fields.items()):
                n += 1
                if theirs[name].get(num) != f:
                    bad.append(f"{name} (otlp_v150) field {num}: sonde {f}, official v{tag} "
                               f"{theirs[name].get(num)}")
            continue
        if not any(name == c or (c.endswith(".") and name.startswith(c)) for c in CHECKED):
            continue
        if name not in theirs:
            bad.append(f"{name}: not in official v{tag}")
            continue
        for num, f in sorted(fields.items()):
            if (name, num) in NEWER_THAN_RELEASE or (name, num) in BODY:
                continue
            n += 1
            if theirs[name].get(num) != f:
                bad.append(f"{name} field {num}: sonde {f}, official v{tag} {theirs[name].get(num)}")
    for svc, methods in sorted(our_services.items()):
        if methods.keys() != their_services.get(svc, {}).keys():
            bad.append(f"service {svc}: sonde {sorted(methods)}, official v{tag} "
                       f"{sorted(their_services.get(svc, {}))}")
    for line in bad:
        print("DIFFERENT:", line)
    print(f"{n} fields and {len(our_services)} services of proto/otlp checked against "
          f"official opentelemetry-proto v{tag} ({n_v150} messages and enums of the v1.5.0 "
          f"layout whole): {len(bad)} differences")
    current = check_current(ours, our_services)
    if current is None:
        print(f"NOT CHECKED: the release of the default layout is not unpacked in {CURRENT_DIR} "
              "(tests/workload/fetch-otlp-proto)")
        return 1 if bad else 0
    bad_current, n_current, tag_current = current
    for line in bad_current:
        print("DIFFERENT:", line)
    print(f"{n_current} fields and {len(our_services)} services of proto/otlp (all but the v1.5.0 "
          f"layout) checked whole against official opentelemetry-proto v{tag_current}: "
          f"{len(bad_current)} differences")
    return 1 if bad or bad_current else 0


if __name__ == "__main__":
    sys.exit(main())
