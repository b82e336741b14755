"""What observation costs: the example's calls served with metrics and tracing off and on, in turns.

    python bench/observability.py                        # SQLite, SSE calls, C=16, 5 rounds
    python bench/observability.py --variants off,metrics,traced --rounds 7 --duration 8
    python bench/observability.py --db postgres --modes sse,modern

Variants (each a fresh daphne from this checkout, its own freshly migrated database):
  off        METRICS and TRACING False
  metrics    METRICS True (prometheus-client), TRACING False
  traced     METRICS and TRACING True, the SDK recording every span, no exporter (MCP_EXAMPLE_OTEL=record)
  exported   the same, every span exported as JSON by a batch span processor to a file
  api        METRICS and TRACING True, opentelemetry-api without an SDK (spans go nowhere)

The variants alternate run after run, their order rotating each round, so a slow minute of a
shared machine hits all alike. Printed: every run's calls/s, the median against `off`, and the
median server CPU time per call (less sensitive than calls/s to what else the machine runs).

`--instructions N`: instead, each variant's server runs under callgrind (valgrind), instrumented
only while C sessions make N calls in all (after as many unmeasured ones), its heartbeat and
wake-up sweep pushed out of that window: the instructions the server executes per call, which
other processes on the machine do not change (at C=1; at higher C how calls share the database
thread's batches still follows the pace).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "bench"

from bench import scenarios  # noqa: E402
from bench.client import HTTPError  # noqa: E402
from bench.server import BenchServer, databases, pinning  # noqa: E402

VARIANTS = {
    "off": ({"METRICS": False, "TRACING": False}, {}),
    "metrics": ({"METRICS": True, "TRACING": False}, {}),
    "traced": ({"METRICS": True, "TRACING": True}, {"MCP_EXAMPLE_OTEL": "record"}),
    "exported": ({"METRICS": True, "TRACING": True}, {"MCP_EXAMPLE_OTEL": "file:{spans}"}),
    "api": ({"METRICS": True, "TRACING": True}, {}),
}
MODES = {
    "sse": ({}, {"era": "legacy"}),
    "json": ({"JSON_RESPONSE": True}, {"era": "legacy"}),
    "modern": ({}, {"era": "modern"}),
}


# Under callgrind: no heartbeat and no wake-up sweep inside the counted window, whose length (and so
# their share per call) would change with the machine's pace.
QUIET = {"LEASE_SECONDS": 600, "WAKEUP_SWEEP_SECONDS": 600}


def log(*parts):
    print("observability:", *parts, file=sys.stderr, flush=True)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--variants", default="off,metrics,traced,exported", help=", ".join(VARIANTS))
    parser.add_argument("--modes", default="sse", help="sse (2025-11-25 SSE answers), json (JSON_RESPONSE), "
                                                       "modern (2026-07-28 echo)")
    parser.add_argument("--concurrency", default="16")
    parser.add_argument("--rounds", type=int, help="runs of each variant (default 5; 1 with --instructions)")
    parser.add_argument("--duration", type=float, default=6.0)
    parser.add_argument("--warmup", type=float, default=1.5)
    parser.add_argument("--quick", action="store_true", help="2 rounds of 1.5 s: a smoke run")
    parser.add_argument("--instructions", type=int, metavar="N",
                        help="count the server's instructions per call over N calls (callgrind) instead")
    return parser.parse_args(argv)


def rotated(names: list[str], round_number: int) -> list[str]:
    shift = round_number % len(names)
    return names[shift:] + names[:shift]


def run_once(dbs, variant: str, mode: str, concurrency: int, a, server_cpu, spans_file: str) -> dict:
    transport, env = VARIANTS[variant]
    mode_transport, calls_kwargs = MODES[mode]
    env = {key: value.format(spans=spans_file) for key, value in env.items()}
    with BenchServer(dbs, {**transport, **mode_transport}, cpu=server_cpu, env=env) as server:
        result = asyncio.run(scenarios.calls(server.url, concurrency=concurrency, duration=a.duration,
                                             warmup=a.warmup, pid=server.pid, **calls_kwargs))
        server.remove_log()
    return result


async def fixed_calls(url: str, concurrency: int, total: int, era: str) -> int:
    """`total` echo calls, spread over `concurrency` clients; -> the calls answered right."""
    opener = scenarios.open_modern if era == "modern" else scenarios.open_session
    clients = [await opener(url, timeout=120) for _ in range(concurrency)]
    right = 0

    async def worker(index: int, client, conn, count: int):
        nonlocal right
        for n in range(count):
            text = f"w{index}c{n}"
            request_id, data = client.tool_call("echo", {"message": text})
            response = await conn.request(data)
            body = await conn.read_body(response)
            if response.status != 200:
                raise HTTPError(response.status, body, "tools/call")
            message, others = client.find_response(response, body, request_id)
            right += scenarios.answered(message, others, response, text, "echo", era)

    share = [total // concurrency + (i < total % concurrency) for i in range(concurrency)]
    await asyncio.gather(*(worker(i, client, conn, share[i]) for i, (client, conn) in enumerate(clients)))
    for client, conn in clients:
        if era == "modern":
            await scenarios.close_modern(client, conn)
        else:
            await scenarios.end_session(client, conn, timeout=120)
    return right


def count_instructions(dbs, variant: str, mode: str, concurrency: int, calls: int, spans_file: str) -> float:
    """The server's instructions per call (callgrind's Ir) over `calls` calls, after as many unmeasured."""
    transport, env = VARIANTS[variant]
    mode_transport, calls_kwargs = MODES[mode]
    env = {key: value.format(spans=spans_file) for key, value in env.items()}
    out_dir = tempfile.mkdtemp(prefix="mcp-bench-callgrind-")
    out = os.path.join(out_dir, "callgrind.out")
    wrapper = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
    era = calls_kwargs["era"]
    try:
        with BenchServer(dbs, {**transport, **mode_transport, **QUIET}, env=env, wrapper=wrapper,
                         start_timeout=600) as server:
            if asyncio.run(fixed_calls(server.url, concurrency, calls, era)) != calls:
                raise SystemExit(f"{variant}: wrong answers while warming up")
            subprocess.run(["callgrind_control", "-i", "on", str(server.pid)], check=True, capture_output=True)
            right = asyncio.run(fixed_calls(server.url, concurrency, calls, era))
            subprocess.run(["callgrind_control", "-d", str(server.pid)], check=True, capture_output=True)
            subprocess.run(["callgrind_control", "-i", "off", str(server.pid)], check=True, capture_output=True)
            server.remove_log()
        if right != calls:
            raise SystemExit(f"{variant}: {calls - right} wrong answers")
        total = 0
        for name in os.listdir(out_dir):
            with open(os.path.join(out_dir, name)) as f:
                text = f.read()
            if re.search(r"^desc: Trigger: dump", text, re.M):  # the measured part, not the rest until exit
                total += int(re.search(r"^totals: (\d+)", text, re.M).group(1))
        return total / calls
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def instructions_main(a, variants: list[str], dbs, spans_file: str) -> int:
    base = variants[0]
    print(f"| {a.db} | C | variant | instructions per call (server, callgrind; every run) | median | x {base} |")
    print("|---|---|---|---|---|---|")
    for mode in a.modes.split(","):
        for c in (int(x) for x in a.concurrency.split(",")):
            counted = {v: [] for v in variants}
            for round_number in range(a.rounds):
                for variant in rotated(variants, round_number):
                    counted[variant].append(count_instructions(dbs, variant, mode, c, a.instructions, spans_file))
                    log(f"{variant:>9} {mode} C={c}: {counted[variant][-1]:,.0f} instructions per call")
            for variant in variants:
                runs = counted[variant]
                print(f"| {mode} | {c} | {variant} | {' / '.join(f'{x:,.0f}' for x in runs)} | {median(runs):,.0f} "
                      f"| x{median(runs) / median(counted[base]):.3f} |")
    return 0


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def spread(values: list[float]) -> str:
    """The runs' spread around their median, in percent: how noisy the machine was."""
    if len(values) < 2:
        return "-"
    mid = statistics.median(values)
    return f"±{(max(values) - min(values)) / 2 / mid * 100:.1f} %"


def main(argv=None) -> int:
    a = parse_args(argv)
    if a.rounds is None:
        a.rounds = 1 if a.instructions else 5
    if a.quick:
        a.rounds, a.duration, a.warmup = 2, 1.5, 0.5
    variants = a.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS] + [m for m in a.modes.split(",") if m not in MODES]
    if unknown:
        raise SystemExit(f"unknown variants or modes: {', '.join(unknown)}")
    dbs = databases(a.db)
    spans_dir = tempfile.mkdtemp(prefix="mcp-bench-spans-")
    spans_file = os.path.join(spans_dir, "spans.json")
    if a.instructions:
        try:
            return instructions_main(a, variants, dbs, spans_file)
        finally:
            dbs.close()
            shutil.rmtree(spans_dir, ignore_errors=True)
    server_cpu, client_cpu = pinning()
    if client_cpu is not None:
        os.sched_setaffinity(0, {client_cpu})
    failed = False
    rows = []
    try:
        for mode in a.modes.split(","):
            for c in (int(x) for x in a.concurrency.split(",")):
                runs = {v: [] for v in variants}
                cpu = {v: [] for v in variants}
                for round_number in range(a.rounds):
                    for variant in rotated(variants, round_number):
                        result = run_once(dbs, variant, mode, c, a, server_cpu, spans_file)
                        if result.get("errors") or result.get("wrong_results"):
                            failed = True
                            log(f"{variant} {mode} C={c}: errors {result.get('errors')}, wrong results {result.get('wrong_results')}")
                        runs[variant].append(result["calls_per_s"])
                        if result.get("server_cpu_ms_per_call") is not None:
                            cpu[variant].append(result["server_cpu_ms_per_call"])
                        log(f"{variant:>9} {mode} C={c}: {result['calls_per_s']:,.0f} calls/s, "
                            f"{result.get('server_cpu_ms_per_call')} ms CPU per call")
                rows.append((mode, c, runs, cpu))
    finally:
        dbs.close()
        exported = os.path.getsize(spans_file) if os.path.exists(spans_file) else 0
        for name in os.listdir(spans_dir):
            os.unlink(os.path.join(spans_dir, name))
        os.rmdir(spans_dir)
    base = variants[0]
    print(f"| {a.db} | C | variant | calls/s (every run) | median | x {base} | spread "
          f"| server CPU ms per call (median) | x {base} |")
    print("|---|---|---|---|---|---|---|---|---|")
    for mode, c, runs, cpu in rows:
        for variant in variants:
            ratio = median(runs[variant]) / median(runs[base])
            cpu_ratio = (f"x{median(cpu[variant]) / median(cpu[base]):.3f}"
                         if cpu[variant] and cpu[base] else "-")
            cpu_text = f"{median(cpu[variant]):.3f}" if cpu[variant] else "-"
            print(f"| {mode} | {c} | {variant} | {' / '.join(f'{x:,.0f}' for x in runs[variant])} | "
                  f"{median(runs[variant]):,.0f} | x{ratio:.3f} | {spread(runs[variant])} | {cpu_text} | {cpu_ratio} |")
    if "exported" in variants:
        print(f"\nexported: {exported:,} bytes of spans written")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
