#!/bin/sh
# sensor-rpc-client-only.sh SONDE_SENSOR - fails if the sensor binary
# defines any server-side rpc symbol: the rpc server and its calls
# (common/rpc_server.c), peer admission (common/rpc_admission.c), or
# gRPC's own server (grpc_server_*, if gRPC were ever linked statically).
# The sensor is a client of the symbolizer; code it cannot run is code a
# reviewer of the root process need not read (meson: common_client_dep).
# Defined symbols only: gRPC's shared library brings its own server code,
# which the binary names nowhere.
set -eu
exe=${1:?usage: sensor-rpc-client-only.sh SONDE_SENSOR}
syms=$(nm --defined-only "$exe") || { echo "nm failed on $exe" >&2; exit 1; }
bad=$(printf '%s\n' "$syms" | awk '{ print $NF }' |
  grep -E '^(rpc_server_|rpc_call_|rpc_admission_|grpc_server_)' || true)
if [ -n "$bad" ]; then
  echo "$exe defines server-side rpc symbols:" >&2
  printf '%s\n' "$bad" | head -20 >&2
  exit 1
fi
echo "$exe: no server-side rpc symbol among $(printf '%s\n' "$syms" | wc -l) defined"
