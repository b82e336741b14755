"""This checkout's calls/s beside another commit's, measured in turns by the bench's own client.

    python bench/against.py REF                      # SQLite, SSE calls, C=16 and 64, 3 rounds
    python bench/against.py REF --db postgres --modes sse,json --rounds 5 --duration 8

REF is checked out into a temporary git worktree (removed afterwards); each side serves the
example project from its own checkout, with its own freshly migrated database, under the same
launcher and pinning as `make bench`. The two alternate run after run (A B B A A B ...), so a slow
minute of a shared machine hits both alike; the table gives every run, the ratio of medians, and
the server's CPU time per call (less sensitive than calls/s to what else the machine is doing).
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "bench"

from bench import scenarios  # noqa: E402
from bench.server import ROOT, BenchServer, databases, pinning  # noqa: E402


def log(*parts):
    print("against:", *parts, file=sys.stderr, flush=True)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ref", help="the commit to compare with (anything `git worktree add` takes)")
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--modes", default="sse", help="sse (SSE answers), json (JSON_RESPONSE=True)")
    parser.add_argument("--concurrency", default="16,64")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each side per mode and concurrency")
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    return parser.parse_args(argv)


def order(rounds: int) -> list[int]:
    """0 = this checkout, 1 = REF: ABBA blocks, so neither side always runs first."""
    sides = []
    for i in range(rounds):
        sides += [0, 1] if i % 2 == 0 else [1, 0]
    return sides


def main(argv=None) -> int:
    a = parse_args(argv)
    server_cpu, client_cpu = pinning()
    if client_cpu is not None:
        import os

        os.sched_setaffinity(0, {client_cpu})
    other = Path(tempfile.mkdtemp(prefix="mcp-against-")) / "checkout"
    subprocess.run(["git", "worktree", "add", "--detach", "-q", str(other), a.ref], cwd=ROOT, check=True)
    try:
        roots = (ROOT, other)
        names = ("this checkout", a.ref)
        dbs = [databases(a.db, root) for root in roots]
        rows = []
        try:
            for mode in a.modes.split(","):
                transport = {"JSON_RESPONSE": mode == "json"}
                for c in (int(x) for x in a.concurrency.split(",")):
                    runs: list[list[float]] = [[], []]
                    cpu: list[list[float]] = [[], []]
                    for side in order(a.rounds):
                        with BenchServer(dbs[side], transport, cpu=server_cpu, root=roots[side]) as server:
                            result = asyncio.run(scenarios.calls(server.url, concurrency=c, duration=a.duration,
                                                                 warmup=a.warmup, pid=server.pid))
                            server.remove_log()
                        if result.get("errors"):
                            log(f"{names[side]} {mode} C={c}: errors {result['errors']}")
                        runs[side].append(result["calls_per_s"])
                        if result.get("server_cpu_ms_per_call") is not None:
                            cpu[side].append(result["server_cpu_ms_per_call"])
                        log(f"{names[side]:>14} {mode} C={c}: {result['calls_per_s']:,.0f} calls/s")
                    rows.append((mode, c, runs, cpu))
        finally:
            for d in dbs:
                d.close()
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=ROOT, check=False)
    print(f"| {a.db} | C | this checkout: calls/s | {a.ref}: calls/s | ratio of medians "
          f"| server CPU ms per call (median, this / {a.ref}) |")
    print("|---|---|---|---|---|---|")
    for mode, c, (ours, theirs), (cpu_ours, cpu_theirs) in rows:
        ratio = statistics.median(ours) / statistics.median(theirs)
        cpu = (f"{statistics.median(cpu_ours):.3f} / {statistics.median(cpu_theirs):.3f}"
               if cpu_ours and cpu_theirs else "-")
        print(f"| {mode} | {c} | {' / '.join(f'{x:,.0f}' for x in ours)} | "
              f"{' / '.join(f'{x:,.0f}' for x in theirs)} | x{ratio:.3f} | {cpu} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
