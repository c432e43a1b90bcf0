#!/usr/bin/env bash
# uprobe_cost.sh - the cost of one uprobe hit by the instruction probed:
# microseconds per call of a tiny function, without and with a bpftrace
# uprobe (count only) on its first instruction. Explains where sonde's Go
# probes go (docs/go-probes.md: the entry probe on the stack check's jump,
# which the kernel emulates, not on the compare, which it single-steps).
# Needs root and bpftrace.
#
#   sudo tests/bench/uprobe_cost.sh [CALLS]
set -eu
calls=${1:-30000}
src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/sonde-uprobe-cost.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
command -v bpftrace >/dev/null || { echo "uprobe_cost.sh: needs bpftrace" >&2; exit 1; }
gcc -O1 -o "$tmp/uc" "$src/uprobe_cost.c"
echo "| first instruction | how the kernel runs it | us/call, no probe | us/call, probed | hit cost us |"
echo "|---|---|---|---|---|"
for kind in cmp mov ret jbe nop push nop5; do
  case $kind in
    cmp|mov|ret) how="single-stepped out of line" ;;
    jbe|nop|push) how="emulated" ;;
    nop5) how="5-byte nop (optimised uprobe where the kernel has it)" ;;
  esac
  base=$("$tmp/uc" "$kind" "$calls")
  bpftrace -e "uprobe:$tmp/uc:uc_$kind { @n = count(); }" >"$tmp/bt.log" 2>&1 &
  bt=$!
  for _ in $(seq 50); do grep -q "Attaching" "$tmp/bt.log" 2>/dev/null && break; sleep 0.1; done
  sleep 1
  probed=$("$tmp/uc" "$kind" "$calls")
  kill -INT $bt
  wait $bt || true
  grep -q "@n: $calls" "$tmp/bt.log" || { echo "uprobe_cost.sh: the $kind probe did not count $calls hits:" >&2; cat "$tmp/bt.log" >&2; exit 1; }
  awk -v k="$kind" -v h="$how" -v b="$base" -v p="$probed" \
    'BEGIN { printf "| %s | %s | %.3f | %.3f | %.2f |\n", k, h, b, p, p - b }'
done
