"""Message classes from the official opentelemetry-proto files at a tagged
release, for the OTLP receivers of the integration tests: Debian's
`opentelemetry-proto` package (bookworm-backports) installs tag v1.5.0's
files under /usr/include/opentelemetry/proto. protoc compiles them at test
time into a descriptor set, loaded into a descriptor pool of its own:
sonde's proto/otlp classes declare the same packages and message names.

What v1.5.0 can check (docs/exports.md, "Which official release checks
what"): trace requests whole (opentelemetry.proto.trace.v1 is stable since
v1.0), and of profile requests the gRPC method and every common.v1 /
resource.v1 message (Resource, InstrumentationScope, AnyValue). The body of
a profile request (ProfilesDictionary, Profile, Sample, ...) is sonde's
v1.10/v1.11 layout, which v1.5.0's profiles v1development predates."""
import pathlib
import subprocess
import tempfile

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "opentelemetry-proto"
ROOT = pathlib.Path("/usr/include")
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


def _tag():
    """The upstream tag Debian's package holds ("1.5.0-1~bpo12+1~1": v1.5.0)."""
    r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", PACKAGE], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout, (
        f"Debian's {PACKAGE} is not installed (deploy/deps.sh installs it): {r.stderr}")
    return "v" + r.stdout.split("-")[0].split(":")[-1]


def _pool():
    for f in FILES:
        assert (ROOT / f).is_file(), f"{ROOT / f} missing: is {PACKAGE} installed?"
    with tempfile.TemporaryDirectory(prefix="sonde-otlp-official.") as d:
        out = pathlib.Path(d) / "official.pb"
        subprocess.run(["protoc", f"-I{ROOT}", "--include_imports", f"--descriptor_set_out={out}",
                        *FILES], check=True)
        fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for fd in fds.file:
        pool.Add(fd)
    return pool


TAG = _tag()
POOL = _pool()
_FACTORY = message_factory.MessageFactory(POOL)


def message_class(full_name):
    """The official class of a message, e.g. "opentelemetry.proto.resource.v1.Resource"."""
    return _FACTORY.GetPrototype(POOL.FindMessageTypeByName(full_name))


def export_path(service):
    """The gRPC path of a service's Export method as the official files declare it."""
    method = POOL.FindServiceByName(service).methods_by_name["Export"]
    return f"/{method.containing_service.full_name}/{method.name}"


def assert_known(msg, where="message"):
    """Every field of msg, recursively, is one the official files declare:
    a field number they do not know (or a wire type that does not fit the
    declared one) stays an unknown field after decoding."""
    assert len(msg.UnknownFields()) == 0, (
        f"{where} ({msg.DESCRIPTOR.full_name}) has fields official {TAG} does not declare: "
        f"{[(u.field_number, u.wire_type) for u in msg.UnknownFields()]}")
    for fd, value in msg.ListFields():
        if fd.type != fd.TYPE_MESSAGE:
            continue
        if fd.label == fd.LABEL_REPEATED:
            if fd.message_type.GetOptions().map_entry:
                continue
            for i, m in enumerate(value):
                assert_known(m, f"{where}.{fd.name}[{i}]")
        else:
            assert_known(value, f"{where}.{fd.name}")


def decode(full_name, raw, where=None):
    """raw decoded with the official class of full_name; no unknown fields."""
    msg = message_class(full_name).FromString(raw)
    assert_known(msg, where or full_name.rsplit(".", 1)[-1])
    return msg


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
