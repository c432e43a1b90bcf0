#!/usr/bin/python3
"""Scale: N simulated sensors into one symbolizer over loopback TCP with
mutual TLS (tests/load/sonde-load), for N = 10, 100, 500 at 20 Hz x 8
CPUs each, plus a max-rate run (a few sensors sending large batches of
counts of already-defined stacks as fast as the symbolizer takes them).
Each run gets a fresh symbolizer and cache. A restart run (--restart N)
warms N sensors up, kills the symbolizer, starts another on the same cache,
lets every sensor reconnect (its Hello lists the tables it holds) and
warm up again, then measures as the steady runs do; it reports the
unwind table bytes sent in the first warm-up and after the restart.
Prints markdown tables; see docs/benchmarks.md for what each column
measures.

  sudo tests/bench/scale.py [--build DIR] [--sensors 10,100,500] [--restart N] [--duration S]
                            [--no-max-rate]
"""
import argparse
import os
import pathlib
import sys

SRC = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SRC / "tests" / "load"))

HEADER = ("| run | sensors | offered samples/s | ingested samples/s | symbolizer CPU s per 1M samples "
          "| send-to-stored p50 ms | p99 ms | max ms | batches timed | symbolizer RSS MiB (end) "
          "| VmHWM MiB | samples sent | stored | lost |")


def row(label, r):
    offered = f"{r['offered']:,.0f}" if r["offered"] else "as fast as taken"
    return (f"| {label} | {r['sensors']:.0f} | {offered} | {r['ingested_per_s']:,.0f} "
            f"| {r['cpu_s_per_million']:.2f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['max_ms']:.1f} "
            f"| {r['batches_timed']:,.0f} | {r['rss_mib']:.0f} | {r['hwm_mib']:.0f} "
            f"| {r['sent']:,.0f} | {r['stored']:,.0f} | {r['lost']:,.0f} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("SONDE_BUILD", str(SRC / "build")))
    ap.add_argument("--sensors", default="10,100,500")
    ap.add_argument("--duration", type=int, default=30)
    ap.add_argument("--no-max-rate", action="store_true")
    ap.add_argument("--restart", type=int, default=0, help="sensors of a restart run (0: none)")
    args = ap.parse_args()
    os.environ["SONDE_BUILD"] = str(pathlib.Path(args.build).resolve())
    import harness

    runs = [(f"steady {n}", ["--sensors", n, "--duration", args.duration])
            for n in args.sensors.split(",") if n]
    if not args.no_max_rate:
        runs.append(("max-rate", ["--sensors", 4, "--max-rate", "--duration", args.duration]))
    if args.restart:
        runs.append((f"restart {args.restart}", ["--sensors", args.restart, "--duration", args.duration]))
    rows, notes, restarts = [], [], []
    for label, load_args in runs:
        sym = harness.TlsSymbolizer()
        try:
            run = harness.run_load_restart if label.startswith("restart") else harness.run_load
            r, _, _ = run(sym, *load_args, timeout=args.duration + 900)
        finally:
            sym.stop()
        rows.append(row(label, r))
        if label.startswith("restart"):
            warm, again = r["warm_table_bytes"] / 1048576, r["restart_table_bytes"] / 1048576
            restarts.append(f"| {r['sensors']:.0f} | {r['warm_tables']:,.0f} | {warm:,.1f} "
                            f"| {r['restart_tables']:,.0f} | {again:,.2f} "
                            f"| {100 * again / warm if warm else 0:.2f} % | {r['restart_s']:.1f} |")
        notes.append(f"{label}: connect {r['connect_s']:.1f} s, warm-up {r['warm_s']:.1f} s "
                     f"(files analysed, tables sent: {r['table_mib']:.0f} MiB), generator CPU "
                     f"{r['gen_cpu_s']:.1f} s, stream errors {r['stream_errors']:.0f}, "
                     f"store failures {r['store_failed']:.0f}")
        print(rows[-1], file=sys.stderr, flush=True)
    print(HEADER)
    print("|" + "---|" * HEADER.count(" | ") + "---|")
    print("\n".join(rows))
    if restarts:
        print()
        print("| restart run: sensors | tables sent in the warm-up | MiB | tables sent after the restart "
              "| MiB | after / warm-up | reconnect + warm-up s |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(restarts))
    print()
    print("\n".join(notes))


if __name__ == "__main__":
    main()
