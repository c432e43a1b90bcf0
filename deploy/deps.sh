#!/usr/bin/env bash
# deps.sh - installs what sonde needs to build, run and test on Debian 12.
# Sourced by deploy/quickstart and tests/run; safe to run again (installs
# only what is missing). Needs root.
#
#   sonde_install_deps build|test
sonde_build_packages=(
  build-essential pkg-config meson ninja-build
  clang llvm bpftool libbpf-dev            # BPF compile, skeletons, loader
  libelf-dev libdw-dev zlib1g-dev          # ELF symbols, DWARF (symbolizer only)
  libiberty-dev                            # C++/Rust demangling (symbolizer only)
  liblzma-dev                              # MiniDebugInfo (.gnu_debugdata is xz; symbolizer only)
  libgrpc-dev protobuf-c-compiler libprotobuf-c-dev  # also the .a files (with Abseil, c-ares, RE2): the CLI links them statically
  libsqlite3-dev libssl-dev                # cache + profile store, SHA-256
  libcmocka-dev                            # unit tests
  libseccomp-dev                           # seccomp allow-lists (symbolizer sandbox, sensor)
  libcapstone-dev                          # x86 decoding: the RETs of hooked Go functions (symbolizer only)
  libcurl4-openssl-dev                     # --debuginfod: debug files by build ID from debuginfod servers, http and https (symbolizer only)
)
sonde_test_packages=(
  python3-grpcio python3-protobuf python3-pytest
  python3-pytest-timeout                   # a hung test fails alone instead of holding the run
  protobuf-compiler protobuf-compiler-grpc # Python stubs for the test clients
  opentelemetry-proto                      # official .proto files, tag v1.5.0 (bookworm-backports): the 1.5.0 layout's OTLP receiver (v1.11.0, the default layout's: tests/workload/fetch-otlp-proto, from sid)
  linux-perf binutils                      # perf and nm as reference tools
  bpftrace                                 # the benchmarks' peer (tests/bench: its frame-pointer walk)
  libclang-rt-14-dev                       # libFuzzer + sanitizer runtimes (tests/fuzz/run)
  libc6-dbg                                # libc's debug files: symbolization accuracy test (llvm-symbolizer comes with llvm)
  dwz                                      # DWZ multifiles (.gnu_debugaltlink) for the symbolization test
  debuginfod                               # a local debuginfod server for test_debuginfod.py
  golang-1.19                              # builds the Go test program (stripped: .gopclntab only)
  golang-1.21-go golang-1.22-go golang-1.23-go # newer Go (bookworm-backports): probe plans + e2e
  xz-utils curl gpgv debian-archive-keyring # the MiniDebugInfo test binary; fetching (and checking) Debian 13 python3.13 and sid's opentelemetry-proto
  chromium                                 # a real browser for the HTML flame graph
  openjdk-17-jdk-headless                  # a JVM (and JFR, its own sampler) for the HotSpot frames test
  ruby ruby-stackprof                      # Ruby 3.1 and its own sampler for the Ruby frames test
  php8.2-cli php-excimer                   # PHP 8.2 and its own sampler (Excimer) for the PHP frames test
  php8.2-dev                               # Zend headers: the PHP offsets checked with offsetof()
  perl                                     # Perl 5.36 for the Perl frames test
  openssl python3-yaml yamllint systemd    # mTLS certificates; manifest and unit checks
)

sonde_install_deps() {
  local want=("${sonde_build_packages[@]}")
  [ "${1:-build}" = test ] && want+=("${sonde_test_packages[@]}")
  # Node may come from elsewhere (with its own npm); Debian's only if none.
  [ "${1:-build}" = test ] && ! command -v npm >/dev/null && want+=(nodejs npm)
  local missing=()
  local p
  for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "sonde: installing ${missing[*]}" >&2
    [ "${1:-build}" = test ] && { sonde_add_backports || return 1; }
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >/tmp/sonde-apt.log 2>&1; then
      echo "sonde: apt-get install failed; see /tmp/sonde-apt.log" >&2
      tail -20 /tmp/sonde-apt.log >&2
      return 1
    fi
  fi
  # The symbolizer drops to this user when started as root.
  if ! getent passwd sonde >/dev/null; then
    useradd --system --no-create-home --shell /usr/sbin/nologin sonde || return 1
  fi
  # The sensor switches to this user after set-up (its own group, no
  # other: it adds the symbolizer socket's group itself).
  if ! getent passwd sonde-sensor >/dev/null; then
    useradd --system --no-create-home --shell /usr/sbin/nologin sonde-sensor || return 1
  fi
}

# The newer Go toolchains the tests build with and the official OTLP .proto
# files (opentelemetry-proto) are only in bookworm-backports:
# add it (signed by the Debian archive key, like the main archive) unless
# some source already has it. Backports' default pin (100) means nothing
# else is upgraded from it.
sonde_add_backports() {
  grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/ && return 0
  cat >/etc/apt/sources.list.d/sonde-bookworm-backports.sources <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
}

# sonde_build DIR: configures (once) and builds into DIR.
sonde_build() {
  local dir=$1 src
  src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  local log
  log=$(mktemp /tmp/sonde-build.XXXXXX)
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$src" >"$log" 2>&1 || { cat "$log" >&2; rm -f "$log"; return 1; }
  fi
  ninja -C "$dir" >"$log" 2>&1 || { tail -40 "$log" >&2; rm -f "$log"; return 1; }
  rm -f "$log"
}
