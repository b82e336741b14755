"""This project beside the official SDK servers, measured by an independent client in one run.

Not part of `make bench` (that one needs nothing outside the repo): this drives the load client
and anchor servers of an external bench directory (`../shared/bench`, set up by its `setup.sh`)
against the anchors and against the example project, server after server, repeat after repeat
(interleaved, so a slow minute of a shared machine hits every server alike). Writes the client's
JSON lines, a markdown summary with the ratios the performance targets are stated in, and a plot.

    python bench/yardstick.py --bench ../shared/bench                      # calls, C=16,64, 3 repeats
    python bench/yardstick.py --bench ../shared/bench --scenarios calls,streams,resume
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "bench"

from bench.run import plot  # noqa: E402
from bench.server import ROOT, BenchServer, databases  # noqa: E402

ANCHORS = ("py-sse", "py-json", "ts-sse", "ts-json", "raw-daphne", "chan-daphne")
# Ours: database and answer mode (JSON mode is JSON_RESPONSE=True), served by `python -m
# mcp_transport.serve`; "-daphne": by plain daphne.
OURS = ("ours-sqlite-sse", "ours-sqlite-json", "ours-pg-sse", "ours-pg-json", "ours-sqlite-sse-daphne")
RESUME_DELAYS = ("0.02", "0.001", "0")
# The bare baselines answer echo only: no resume scenario for them.
NO_PROGRESS_TOOL = ("raw-daphne", "chan-daphne")


def log(*parts):
    print(time.strftime("[%H:%M:%S]"), *parts, file=sys.stderr, flush=True)


class Anchor:
    def __init__(self, bench: Path, home: Path, name: str, port: int):
        self.bench, self.home, self.name, self.port = bench, home, name, port
        self.pid = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/mcp"

    def __enter__(self):
        out = subprocess.run(["bash", str(self.bench / "anchors/servers/start.sh"), self.name, str(self.port), "0"],
                             capture_output=True, text=True, timeout=60, env={**os.environ,
                                                                              "MCP_BENCH_HOME": str(self.home)})
        if out.returncode:
            raise RuntimeError(f"{self.name} did not start: {out.stderr[-2000:]}")
        self.pid = int(out.stdout.split()[-1])
        return self

    def __exit__(self, *exc):
        try:
            os.kill(self.pid, 15)
            for _ in range(50):
                os.kill(self.pid, 0)
                time.sleep(0.1)
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass


class Ours:
    def __init__(self, dbs: dict, name: str):
        self.name = name
        json_mode = name.endswith("-json")
        self.server = BenchServer(dbs["postgres" if "-pg-" in name else "sqlite"],
                                  {"JSON_RESPONSE": True} if json_mode else {}, cpu=0,
                                  launcher="daphne" if name.endswith("-daphne") else "mcp_transport.serve")

    @property
    def url(self):
        return self.server.url

    @property
    def pid(self):
        return self.server.pid

    def __enter__(self):
        self.server.start()
        return self

    def __exit__(self, *exc):
        self.server.stop()
        self.server.remove_log()


def load(args, target, *scenario: str, label: str) -> dict:
    command = ["taskset", "-c", "1", str(args.home / "venv/bin/python"), str(args.bench / "mcpload.py"), target.url,
               *scenario, "--client", "raw", "--pid", str(target.pid), "--label", label]
    out = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode or not lines:
        return {"label": label, "fatal": (out.stderr or out.stdout)[-2000:]}
    return json.loads(lines[-1])


def run(args) -> list[dict]:
    dbs = {}
    if any("-pg-" in s for s in args.servers):
        dbs["postgres"] = databases("postgres")
    if any("-sqlite-" in s for s in args.servers):
        dbs["sqlite"] = databases("sqlite")
    ports = {name: 8500 + i for i, name in enumerate(ANCHORS)}
    results = []

    def target(name):
        return Ours(dbs, name) if name.startswith("ours-") else Anchor(args.bench, args.home, name, ports[name])

    def record(result):
        results.append(result)
        with open(args.out, "a") as f:
            f.write(json.dumps(result) + "\n")
        if "fatal" in result:
            log("FAILED", result["label"], result["fatal"][-300:])

    try:
        for rep in range(1, args.reps + 1):
            if "calls" in args.scenarios:
                for name in args.servers:
                    with target(name) as t:
                        for c in args.cs:
                            log(f"{name} calls C={c} rep={rep}")
                            record(load(args, t, "calls", "-c", str(c), "--duration", str(args.duration),
                                        "--warmup", "1", label=f"{name} rep={rep}"))
        if "streams" in args.scenarios:
            for name in args.servers:
                if name.endswith(("-json", "-daphne")):  # the same app as ours-*-sse, for held GET streams
                    continue
                with target(name) as t:
                    log(f"{name} streams S={args.streams}")
                    record(load(args, t, "streams", "-s", str(args.streams), "--hold", "10", label=name))
        if "resume" in args.scenarios:
            for name in args.servers:
                if name.endswith(("-json", "-daphne")) or name in NO_PROGRESS_TOOL:
                    continue
                with target(name) as t:
                    for delay in RESUME_DELAYS:
                        log(f"{name} resume delay={delay}")
                        record(load(args, t, "resume", "--resume-args", f'{{"count": 50, "delay": {delay}}}',
                                    "--repeats", str(args.resume_repeats), label=name))
    finally:
        for d in dbs.values():
            d.close()
    return results


def medians(results) -> dict[tuple[str, int], float]:
    runs: dict[tuple[str, int], list[float]] = {}
    for r in results:
        if r.get("scenario") == "calls" and r.get("calls_per_s") is not None:
            runs.setdefault((r["label"].split()[0], r["concurrency"]), []).append(r["calls_per_s"])
    return {key: statistics.median(values) for key, values in runs.items()}


def ratios(results, cs) -> str:
    """The performance targets' ratios, from the medians of the repeats."""
    m = medians(results)
    lines = ["| ours | C | calls/s | / py-sse | / py-json | / ts-sse | / ts-json |", "|---|---|---|---|---|---|---|"]
    for name in OURS:
        for c in cs:
            if (name, c) not in m:
                continue
            cells = [f"{m[(name, c)] / m[(a, c)]:.2f}x" if m.get((a, c)) else "-"
                     for a in ("py-sse", "py-json", "ts-sse", "ts-json")]
            lines.append(f"| {name} | {c} | {m[(name, c)]:,.0f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", type=Path, required=True, help="the external bench directory (its HOWTO.md)")
    parser.add_argument("--home", type=Path, default=Path(os.environ.get(
        "MCP_BENCH_HOME", Path.home() / ".cache/mcp-bench")), help="its work dir (setup.sh made it)")
    parser.add_argument("--servers", default=",".join(ANCHORS + OURS))
    parser.add_argument("--scenarios", default="calls")
    parser.add_argument("--cs", default="16,64")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--duration", type=float, default=10)
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--resume-repeats", type=int, default=20)
    parser.add_argument("--out", type=Path, default=ROOT / "test-output/yardstick.jsonl")
    parser.add_argument("--plot", default=str(ROOT / "test-output/yardstick-calls.png"))
    args = parser.parse_args(argv)
    args.servers = [s for s in args.servers.split(",") if s]
    args.scenarios = [s for s in args.scenarios.split(",") if s]
    args.cs = [int(c) for c in args.cs.split(",")]
    unknown = set(args.servers) - set(ANCHORS + OURS)
    if unknown:
        parser.error(f"unknown servers: {', '.join(sorted(unknown))}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("")
    results = run(args)
    summary = subprocess.run([sys.executable, str(args.bench / "summarize.py"), str(args.out)],
                             capture_output=True, text=True).stdout
    print(summary)
    print("### ratios (medians of the repeats)\n")
    print(ratios(results, args.cs))
    ours, anchors = [], {}
    for (name, c), value in sorted(medians(results).items()):
        if name.startswith("ours-"):
            ours.append({"scenario": "calls", "calls_per_s": value, "concurrency": c,
                         "mode": name.removeprefix("ours-").replace("-", " ")})
        else:
            anchors.setdefault(name, []).append((c, value))
    path = plot(ours, args.plot, "calls/s against concurrency, one run, medians of the repeats (echo tool)", anchors)
    if path:
        print(f"\nplot: {path}")
    return 1 if any("fatal" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
