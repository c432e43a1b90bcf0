"""Message classes from the official opentelemetry-proto files at two tagged
releases, for the OTLP receivers of the integration tests (docs/exports.md,
"Checked against the official release"):

- CURRENT: the release sonde's default profiles layout follows, Debian
  sid's `opentelemetry-proto` (1.11.0-1: tag v1.11.0), unpacked by
  tests/workload/fetch-otlp-proto into the directory $SONDE_OTLP_PROTO
  names (tests/run exports it; when it is unset the script is run here,
  and it answers at once from its cache). Default-layout profile requests
  and trace requests are decoded whole with it.
- V150: Debian's installed `opentelemetry-proto` (bookworm-backports,
  tag v1.5.0, under /usr/include), for `--otlp-profiles-layout 1.5.0`;
  trace requests are decoded with it too.

Each release's tag is read from the package version actually unpacked or
installed, never assumed. protoc compiles each release's files at test
time into a descriptor set, loaded into a descriptor pool of its own (the
releases, and sonde's own proto/otlp, declare the same packages and
message names)."""
import os
import pathlib
import subprocess
import tempfile

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "opentelemetry-proto"
FILES = [
    "opentelemetry/proto/common/v1/common.proto",
    "opentelemetry/proto/resource/v1/resource.proto",
    "opentelemetry/proto/trace/v1/trace.proto",
    "opentelemetry/proto/collector/trace/v1/trace_service.proto",
    "opentelemetry/proto/profiles/v1development/profiles.proto",
    "opentelemetry/proto/collector/profiles/v1development/profiles_service.proto",
]
TRACE_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
PROFILES_SERVICE = "opentelemetry.proto.collector.profiles.v1development.ProfilesService"
FETCH = pathlib.Path(__file__).resolve().parents[1] / "workload" / "fetch-otlp-proto"


def upstream_tag(debian_version):
    """The upstream tag of a Debian version ("1.11.0-1", "1.5.0-1~bpo12+1~1"): "v1.11.0"."""
    return "v" + debian_version.split(":")[-1].split("-")[0]


class Release:
    """One official release's files under include (protoc's -I), compiled
    into a pool of their own; tag is the release they are ("v1.11.0")."""

    def __init__(self, include, tag, origin):
        self.include, self.tag, self.origin = pathlib.Path(include), tag, origin
        for f in FILES:
            assert (self.include / f).is_file(), f"{self.include / f} missing ({origin})"
        with tempfile.TemporaryDirectory(prefix="sonde-otlp-official.") as d:
            out = pathlib.Path(d) / "official.pb"
            subprocess.run(["protoc", f"-I{self.include}", "--include_imports",
                            f"--descriptor_set_out={out}", *FILES], check=True)
            fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
        self.pool = descriptor_pool.DescriptorPool()
        for fd in fds.file:
            self.pool.Add(fd)
        self._factory = message_factory.MessageFactory(self.pool)

    def message_class(self, full_name):
        """The official class of a message, e.g. "opentelemetry.proto.resource.v1.Resource"."""
        return self._factory.GetPrototype(self.pool.FindMessageTypeByName(full_name))

    def export_path(self, service):
        """The gRPC path of a service's Export method as the official files declare it."""
        method = self.pool.FindServiceByName(service).methods_by_name["Export"]
        return f"/{method.containing_service.full_name}/{method.name}"

    def assert_known(self, msg, where="message"):
        """Every field of msg, recursively, is one the official files declare:
        a field number they do not know (or a wire type that does not fit the
        declared one) stays an unknown field after decoding."""
        assert len(msg.UnknownFields()) == 0, (
            f"{where} ({msg.DESCRIPTOR.full_name}) has fields official {self.tag} does not declare: "
            f"{[(u.field_number, u.wire_type) for u in msg.UnknownFields()]}")
        for fd, value in msg.ListFields():
            if fd.type != fd.TYPE_MESSAGE:
                continue
            if fd.label == fd.LABEL_REPEATED:
                if fd.message_type.GetOptions().map_entry:
                    continue
                for i, m in enumerate(value):
                    self.assert_known(m, f"{where}.{fd.name}[{i}]")
            else:
                self.assert_known(value, f"{where}.{fd.name}")

    def decode(self, full_name, raw, where=None):
        """raw decoded with the official class of full_name; no unknown fields."""
        msg = self.message_class(full_name).FromString(raw)
        self.assert_known(msg, where or full_name.rsplit(".", 1)[-1])
        return msg


def _v150():
    """Debian's installed package (deploy/deps.sh): "1.5.0-1~bpo12+1~1" is v1.5.0."""
    r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", PACKAGE], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout, (
        f"Debian's {PACKAGE} is not installed (deploy/deps.sh installs it): {r.stderr}")
    return Release("/usr/include", upstream_tag(r.stdout), f"Debian's installed {PACKAGE} {r.stdout}")


def current_dir():
    """The directory fetch-otlp-proto unpacked sid's package into."""
    d = os.environ.get("SONDE_OTLP_PROTO")
    if not d:
        r = subprocess.run([str(FETCH)], capture_output=True, text=True)
        assert r.returncode == 0, f"{FETCH} failed: {r.stderr}"
        d = r.stdout.strip()
    return pathlib.Path(d)


def _current():
    d = current_dir()
    versions = dict(line.split(" ", 1) for line in (d / "versions").read_text().splitlines() if line)
    assert PACKAGE in versions, f"{d}/versions names no {PACKAGE}: {versions}"
    return Release(d / "root" / "usr" / "include", upstream_tag(versions[PACKAGE]),
                   f"Debian sid's {PACKAGE} {versions[PACKAGE]} in {d}")


V150 = _v150()
CURRENT = _current()


def message_names(msg, out=None):
    """The full names of msg's type and of every message in it, recursively."""
    out = set() if out is None else out
    out.add(msg.DESCRIPTOR.full_name)
    for fd, value in msg.ListFields():
        if fd.type != fd.TYPE_MESSAGE:
            continue
        for m in (value if fd.label == fd.LABEL_REPEATED else [value]):
            message_names(m, out)
    return out


def any_value(v):
    """An official AnyValue's Python value (string, int, bool, double, bytes)."""
    kind = v.WhichOneof("value")
    assert kind in ("string_value", "int_value", "bool_value", "double_value", "bytes_value"), v
    return getattr(v, kind)


def attributes(kvs):
    """{key: value} of official KeyValues; a key appears once."""
    out = {}
    for kv in kvs:
        assert kv.key and kv.key not in out, kv
        out[kv.key] = any_value(kv.value)
    return out
