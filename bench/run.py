"""`make bench` / `python -m bench` / `python bench/run.py`: serve the example project under daphne
(`python -m mcp_transport.serve`, or plain daphne with --launcher daphne; the calls also under
uvicorn, --calls-also) and measure it with the bench's own client. Prints one markdown table; writes the figures as JSON (test-output/bench.json)
and a plot of calls/s against concurrency (if matplotlib is there).

    python -m bench                          # everything, SQLite (the embedded default)
    python -m bench --quick                  # short runs, small numbers: a smoke run
    python -m bench --scenarios calls --concurrency 1,16,64 --duration 20
    python -m bench --db postgres            # example_project.settings_scaled, a fresh PG database
    python -m bench --scenarios calls --modes modern   # MCP 2026-07-28 calls only (JSON echo, SSE progress)

Each scenario (and each calls mode) gets a fresh daphne process and a fresh database. The
server is pinned to CPU 0 and this client to CPU 1 when there are two CPUs. Exits 1 when a
correctness figure is wrong (errors, lost or duplicated events); timings are only reported.
"""
from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import resource
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python bench/run.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "bench"

from bench import scenarios  # noqa: E402
from bench.server import APP, FLOOR, ROOT, BenchServer, databases, pinning  # noqa: E402

ALL = ("calls", "streams", "resume", "replay", "burst", "growth")
GROWTH_PARTS = ("rows", "streams", "floor")
OUT_DIR = ROOT / "test-output"


LAUNCHERS = ["mcp_transport.serve", "daphne", "uvicorn"]


def log(*parts):
    print("bench:", *parts, file=sys.stderr, flush=True)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short durations and small numbers (smoke run)")
    parser.add_argument("--scenarios", default=",".join(ALL), help=f"comma-separated, of {', '.join(ALL)}")
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--duration", type=float, help="seconds measured per calls run (default 10; quick 2)")
    parser.add_argument("--warmup", type=float, help="seconds of calls before measuring (default 2; quick 0.5)")
    parser.add_argument("--concurrency", default="16,64", help="calls: sessions, comma-separated")
    parser.add_argument("--modes", default="sse,json,modern",
                        help="calls: sse (SSE answers), json (JSON_RESPONSE=True), modern (MCP 2026-07-28, the "
                             "defaults: stateless echo calls answered with JSON, then progress(3) calls with a "
                             "progress token answered on SSE)")
    parser.add_argument("--streams", type=int, help="streams: held GET streams (default 1000; quick 200)")
    parser.add_argument("--hold", type=float, help="streams: seconds to hold them (default 5; quick 2)")
    parser.add_argument("--repeats", type=int, help="resume: runs per mode and delay (default 20; quick 3)")
    parser.add_argument("--resume-count", type=int, default=50, help="resume: notifications per call")
    parser.add_argument("--delays", default="0.02,0.001,0", help="resume: seconds between notifications")
    parser.add_argument("--replay-events", type=int, help="replay: events in the stream (default 10000; quick 2000)")
    parser.add_argument("--replay-rows", type=int, help="replay: rows in the big table (default 1000000; quick 100000)")
    parser.add_argument("--replay-repeats", type=int, help="replay: replays measured per table size (default 15)")
    parser.add_argument("--burst-events", type=int, help="burst: notifications (default 10000; quick 2000)")
    parser.add_argument("--growth-rows", type=int, help="growth: stored events on the grown server (default 1000000; "
                                                        "quick 100000)")
    parser.add_argument("--growth-held", type=int, help="growth: sessions holding a GET stream there (default 1000; "
                                                        "quick 100)")
    parser.add_argument("--growth-rounds", type=int, default=3,
                        help="growth: calls runs on each side of each comparison, in turns (default 3)")
    parser.add_argument("--launcher", default="mcp_transport.serve", choices=LAUNCHERS,
                        help="the server every scenario runs under (python -m ...)")
    parser.add_argument("--calls-also", default="uvicorn",
                        help=f"comma-separated, of {', '.join(LAUNCHERS)}: servers the calls scenario also runs "
                             f"under, beside --launcher ('' for none)")
    parser.add_argument("--no-pin", action="store_true", help="do not pin the server and the client to CPUs")
    parser.add_argument("--json", default=str(OUT_DIR / "bench.json"), help="where to write the figures")
    parser.add_argument("--plot", default=str(OUT_DIR / "bench-calls.png"), help="where to write the plot")
    parser.add_argument("--compare", action="append", default=[], metavar="FILE.jsonl",
                        help="also plot the calls/s of other servers: JSON lines of bench/yardstick.py "
                             "(test-output/yardstick.jsonl) or of a client that labels each line with its "
                             "server (the first word of `label`); repeatable")
    parser.add_argument("--keep-logs", action="store_true", help="keep every daphne log (else only those with errors)")
    args = parser.parse_args(argv)
    quick = args.quick
    defaults = dict(duration=(2.0, 10.0), warmup=(0.5, 2.0), streams=(200, 1000), hold=(2.0, 5.0),
                    repeats=(3, 20), replay_events=(2000, 10_000), replay_rows=(100_000, 1_000_000),
                    replay_repeats=(3, 15), burst_events=(2000, 10_000),
                    growth_rows=(100_000, 1_000_000), growth_held=(100, 1000))
    for name, (small, full) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, small if quick else full)
    args.scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = set(args.scenarios) - set(ALL)
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    args.concurrency = [int(c) for c in args.concurrency.split(",") if c.strip()]
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if set(args.modes) - {"sse", "json", "modern"}:
        parser.error("--modes takes sse, json and/or modern")
    args.delays = [float(d) for d in args.delays.split(",") if d.strip()]
    args.calls_also = [s.strip() for s in args.calls_also.split(",") if s.strip() and s.strip() != args.launcher]
    if set(args.calls_also) - set(LAUNCHERS):
        parser.error(f"--calls-also takes {', '.join(LAUNCHERS)}")
    return args


def raise_fd_limit(wanted: int):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def git_revision() -> str | None:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return rev + ("+dirty" if dirty else "") if rev else None
    except (OSError, subprocess.SubprocessError):
        return None


BENIGN_LOG_LINES = ("SIGTERM: closing connections",)  # the bench's own stop (mcp_transport.execution.shutdown)


def log_problems(text: str) -> list[str]:
    """What a daphne log says besides the expected: with -v 0 and warnings-only logging, any line
    (a traceback, a limit hit, a warning) is worth a look."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith(BENIGN_LOG_LINES)]
    return lines[:20]


class Runner:
    def __init__(self, args):
        self.args = args
        self.server_cpu, self.client_cpu = (None, None) if args.no_pin else pinning()
        self.dbs = None
        self.results: list[dict] = []

    def serve(self, transport: dict | None = None, app: str = APP, launcher: str | None = None) -> BenchServer:
        return BenchServer(self.dbs, transport, self.server_cpu, launcher=launcher or self.args.launcher,
                           app=app).start()

    def finish(self, server: BenchServer, result: dict | list):
        """Stop the server; attach what its log says went wrong."""
        server.stop()
        problems = log_problems(server.logs())
        items = result if isinstance(result, list) else [result]
        for item in items:
            item["server_log_problems"] = item.get("server_log_problems", []) + problems
            if problems:
                item.setdefault("server_logs", []).append(server.log_path)
        if problems and not self.args.keep_logs:
            log(f"the server logged problems; its log is kept: {server.log_path}")
        if not problems and not self.args.keep_logs:
            server.remove_log()

    def run_scenario(self, name: str, make, transport: dict | None = None, apps=(APP,),
                     launcher: str | None = None) -> dict | list:
        """`make(server, ...)` against fresh servers of `apps`, each project with a database of its own."""
        started = []
        result: dict | list = {"scenario": name, "error": "did not run"}
        try:
            for app in apps:
                started.append(self.serve(transport, app, launcher))
        except Exception as exc:  # noqa: BLE001 (reported in the table; the other scenarios still run)
            log(f"{name}: the server did not start: {exc}")
            result = {"scenario": name, "error": f"the server did not start: {str(exc).strip().splitlines()[-1]}"}
        else:
            try:
                result = asyncio.run(make(*started))
            except Exception as exc:  # noqa: BLE001 (reported in the table; the other scenarios still run)
                result = {"scenario": name, "error": scenarios.short(exc)}
                log(f"{name} failed: {result['error']}")
        for server in started:
            self.finish(server, result)
        return result

    def calls(self):
        a = self.args
        for launcher in [a.launcher, *a.calls_also]:
            self.calls_under(launcher)

    def calls_under(self, launcher: str):
        a = self.args
        for mode in a.modes:
            transport = {"JSON_RESPONSE": mode == "json"}
            # 2026-07-28: the same server runs echo calls (JSON answers), then progress(3) (SSE answers).
            loads = ([("modern-json", {"era": "modern", "tool": "echo"}),
                      ("modern-sse", {"era": "modern", "tool": "progress"})] if mode == "modern" else [(mode, {})])

            async def go(server, loads=loads):
                out = []
                for label, load in loads:
                    for c in a.concurrency:
                        log(f"calls ({launcher}): {label.upper()} C={c}, {a.duration:g} s (+{a.warmup:g} s warm-up)")
                        r = await scenarios.calls(server.url, concurrency=c, duration=a.duration, warmup=a.warmup,
                                                  pid=server.pid, **load)
                        r["requested_mode"] = label
                        out.append(r)
                return out

            result = self.run_scenario("calls", go, transport, launcher=launcher)
            for r in result if isinstance(result, list) else [result]:
                r.setdefault("requested_mode", mode)
                r["server"] = launcher
                self.results.append(r)

    def streams(self):
        a = self.args
        log(f"streams: {a.streams} sessions with a GET stream, held {a.hold:g} s")
        self.results.append(self.run_scenario(
            "streams", lambda server: scenarios.streams(server.url, count=a.streams, hold=a.hold, pid=server.pid)))

    def resume(self):
        a = self.args
        log(f"resume: K={a.resume_count}, delays {a.delays}, {a.repeats} repeats per mode")
        self.results.append(self.run_scenario(
            "resume", lambda server: scenarios.resume(server.url, count=a.resume_count, delays=a.delays,
                                                      repeats=a.repeats)))

    def replay(self):
        a = self.args
        log(f"replay: {a.replay_events} events, in turns from a small table and one of ~{a.replay_rows} rows")
        self.results.append(self.run_scenario(
            "replay", lambda small, large: scenarios.replay(
                small.url, large.url, count=a.replay_events, total_rows=a.replay_rows, repeats=a.replay_repeats,
                small_db=small.dbtool(), large_db=large.dbtool(), pid=large.pid), apps=(APP, APP)))

    def burst(self):
        a = self.args
        log(f"burst: {a.burst_events} notifications back to back")
        self.results.append(self.run_scenario(
            "burst", lambda server: scenarios.burst(server.url, count=a.burst_events, pid=server.pid,
                                                    db=server.dbtool())))

    def growth(self):
        a = self.args
        log(f"growth: calls C=16 in turns, {a.growth_rounds} x {a.duration:g} s each side: a fresh server against "
            f"one with ~{a.growth_rows} stored events; with {a.growth_held} held GET streams against none, on "
            f"the project and on the bare app")
        self.results.append(self.run_scenario(
            "growth", lambda base, grown, floor: scenarios.growth(
                base.url, grown.url, floor.url, total_rows=a.growth_rows, held=a.growth_held, duration=a.duration,
                rounds=a.growth_rounds, base_pid=base.pid, grown_pid=grown.pid, floor_pid=floor.pid,
                grown_db=grown.dbtool()),
            apps=(APP, APP, FLOOR)))

    def run(self) -> list[dict]:
        if self.client_cpu is not None:
            os.sched_setaffinity(0, {self.client_cpu})
        self.dbs = databases(self.args.db)
        try:
            for name in ALL:
                if name in self.args.scenarios:
                    getattr(self, name)()
        finally:
            self.dbs.close()
        return self.results


# Reporting

def n(value, digits=0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and digits:
        return f"{value:,.{digits}f}"
    return f"{round(value):,}"


def mb(kb) -> str:
    return "-" if kb is None else f"{kb / 1024:,.0f} MB"


def correctness(result: dict) -> list[str]:
    """What is wrong in a result (empty when it is right)."""
    scenario, wrong = result.get("scenario"), []
    if "error" in result and isinstance(result.get("error"), str):
        return [f"{scenario}: {result['error']}"]
    if scenario == "calls":
        if result["errors"] or result["wrong_results"] or not result["calls"]:
            wrong.append(f"calls C={result['concurrency']}: {result['calls']} calls, {result['errors']} errors, "
                         f"{result['wrong_results']} wrong results {result['error_samples']}")
        if result["sessions"] != result["concurrency"]:
            wrong.append(f"calls: {result['sessions']} of {result['concurrency']} sessions opened")
    elif scenario == "streams":
        if not result["all_held"] or result["errors"]:
            wrong.append(f"streams: {result['held']} of {result['streams']} held, {result['errors']} errors "
                         f"{result['error_samples']}")
        if result["ended_on_delete"] != result["opened"]:
            wrong.append(f"streams: {result['ended_on_delete']} of {result['opened']} GET streams ended on DELETE")
    elif scenario == "resume":
        for r in result["results"]:
            bad = {k: r[k] for k in ("lost", "duplicated", "out_of_order", "id_regressions", "missing_response")
                   if r[k]}
            if bad:
                wrong.append(f"resume {r['mode']} delay {r['delay']}: {bad} {r['errors']}")
    elif scenario in ("replay", "burst") and not result.get("ok"):
        wrong.append(f"{scenario}: incomplete or out of order")
    elif scenario == "growth":
        for key in GROWTH_PARTS:
            part = result.get(key)
            if part and not part["ok"]:
                wrong.append(f"growth {key}: {part['with'].get('held', '-')} of {result['held']} held, errors "
                             f"{part['without']['errors']} / {part['with']['errors']} {part.get('setup_errors', '')}")
    return wrong


def server_name(result: dict) -> str:
    return {"mcp_transport.serve": "daphne (launcher)"}.get(result.get("server"), result.get("server") or "daphne")


def rows_for(result: dict) -> list[list[str]]:
    scenario = result.get("scenario")
    if isinstance(result.get("error"), str):
        return [[scenario, "", "failed", result["error"], "-", "-", "FAILED"]]
    if scenario == "calls":
        mode = (result.get("mode") or result.get("requested_mode") or "").upper()
        if result.get("era") == "modern":
            mode = f"2026-07-28 {mode} ({result.get('tool')})"
        ok = "ok" if not correctness(result) else "FAILED"
        return [[
            "calls", f"{mode} C={result['concurrency']}, {server_name(result)}", f"{n(result['calls_per_s'])} calls/s",
            f"p50 {n(result['p50_ms'], 1)} / p90 {n(result['p90_ms'], 1)} / p99 {n(result['p99_ms'], 1)} ms; "
            f"{n(result['server_cpu_ms_per_call'], 3)} ms CPU/call; client {n(result['client_cpu_pct'])} %, "
            f"other {n(result.get('host_other_cpu_pct'))} %",
            n(result["server_cpu_pct"]), mb(result["server_rss_kb"]),
            f"{ok}: {n(result['calls'])} calls, {result['errors']} errors",
        ]]
    if scenario == "streams":
        ok = "ok" if not correctness(result) else "FAILED"
        return [[
            "streams", f"S={n(result['streams'])}, held {result['hold_s']:g} s",
            f"{n(result['kb_per_session_plus_stream'], 1)} KB per session+stream",
            f"session {n(result['kb_per_session'], 1)} KB + stream {n(result['kb_per_stream'], 1)} KB; "
            f"{n(result['server_fds']['streams_open'])} fds; opened in {result['setup_s']:g} s",
            f"{n(result['idle_server_cpu_pct'], 1)} (idle)", mb(result["server_rss_kb"]),
            f"{ok}: {n(result['held'])}/{n(result['streams'])} held, "
            f"{n(result['ended_on_delete'])} ended on DELETE",
        ]]
    if scenario == "resume":
        rows = []
        for r in result["results"]:
            bad = [f"{r[k]} {label}" for k, label in (("lost", "lost"), ("duplicated", "dup"),
                                                      ("out_of_order", "out of order"),
                                                      ("missing_response", "no response"),
                                                      ("id_regressions", "id regressions")) if r[k]]
            rows.append([
                "resume", f"{r['mode']}, delay {r['delay']:g} s, K={result['count']} x{r['runs']}",
                f"{n(r['reconnect_to_done_ms_p50'], 1)} ms reconnect-to-done (p50)",
                f"max {n(r['reconnect_to_done_ms_max'], 1)} ms; {r['extra_reconnects']} extra reconnects",
                "-", "-",
                "ok: 0 lost / 0 dup / 0 out of order" if not bad else "FAILED: " + ", ".join(bad),
            ])
        return rows
    if scenario == "replay":
        rows = []
        for key in ("small", "large"):
            part = result.get(key)
            if not part:
                continue
            extra = ""
            if key == "large":
                extra = f"; x{result['ratio_large_small']:.2f} of the small table (in turns)"
                if result.get("fill"):
                    extra += f"; filled in {result['fill']['seconds']:g} s"
            rows.append([
                "replay", f"{n(result['count'])} events, table {n(part['table_rows'])} rows",
                f"{n(part['p50_ms'], 1)} ms (p50 of {part['repeats']})",
                f"min {n(part['min_ms'], 1)} / max {n(part['max_ms'], 1)} ms{extra}",
                "-", mb(result.get("server_rss_kb")),
                f"{'ok' if part['complete'] else 'FAILED'}: {n(part['events'])} events in order",
            ])
        return rows
    if scenario == "burst":
        stored = result.get("stored_events_per_s")
        return [[
            "burst", f"{n(result['count'])} notifications",
            f"{n(result['delivered_events_per_s'])} events/s delivered",
            f"{n(stored)} events/s stored; first byte {n(result['first_byte_ms'], 1)} ms; "
            f"total {n(result['elapsed_s'] * 1000)} ms",
            n(result["server_cpu_pct"]), mb(result["server_rss_kb"]),
            f"{'ok' if result['ok'] else 'FAILED'}: {n(result['notifications'])} in order, "
            f"response {'yes' if result['response'] else 'no'}",
        ]]
    if scenario == "growth":
        rows = []
        for key in GROWTH_PARTS:
            part = result.get(key)
            if not part:
                continue
            without, with_ = part["without"], part["with"]
            if key == "rows":
                what = f"{n(with_['table_rows'])} stored events against a fresh server"
            else:
                what = (f"{'the bare app (bench/floor.py), ' if key == 'floor' else ''}"
                        f"{n(with_['held'])} sessions holding GET streams against none")
            runs = " / ".join(n(v, 3) for v in without["cpu_ms_per_call_runs"])
            runs_with = " / ".join(n(v, 3) for v in with_["cpu_ms_per_call_runs"])
            rows.append([
                "growth", f"SSE C={result['concurrency']}, {what}",
                f"x{part['ratio']:.2f} CPU/call" if part["ratio"] else "-",
                f"{n(without['cpu_ms_per_call'], 3)} -> {n(with_['cpu_ms_per_call'], 3)} ms, medians of "
                f"{result['rounds']} runs in turns ({runs} against {runs_with}); "
                f"{n(without['calls_per_s'])} -> {n(with_['calls_per_s'])} calls/s",
                "-", f"{mb(without['server_rss_kb'])} -> {mb(with_['server_rss_kb'])}",
                f"{'ok' if part['ok'] else 'FAILED'}: {without['errors'] + with_['errors']} errors",
            ])
        return rows
    return []


def table(results: list[dict]) -> str:
    header = ["scenario", "variant", "figure", "details", "server CPU %", "server RSS", "correctness"]
    rows = [row for result in results for row in rows_for(result)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "/") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def compared(paths: list[str]) -> dict[str, list[tuple[int, float]]]:
    """Other servers' calls/s by concurrency (median of repeats) from JSON lines (yardstick's, or any
    client's whose `label` starts with the server's name)."""
    runs: dict[tuple[str, int], list[float]] = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            label = str(r.get("server") or r.get("label") or "?")
            if r.get("scenario") != "calls" or r.get("calls_per_s") is None or "xcheck" in label:
                continue
            runs.setdefault((label.split()[0], int(r["concurrency"])), []).append(float(r["calls_per_s"]))
    out: dict[str, list[tuple[int, float]]] = {}
    for (server, c), values in sorted(runs.items()):
        out.setdefault(server, []).append((c, statistics.median(values)))
    return out


def plot(results: list[dict], path: str, title: str, others: dict | None = None) -> str | None:
    """calls/s against concurrency, one line per mode (and per compared server); None (and a
    message) without matplotlib."""
    points: dict[str, list[tuple[int, float]]] = {}
    for r in results:
        if r.get("scenario") == "calls" and r.get("calls_per_s") is not None:
            mode = (r.get("mode") or r.get("requested_mode") or "?").upper()
            if r.get("era") == "modern":
                mode = f"2026-07-28 {mode}"
            points.setdefault(f"{server_name(r)} ({mode})", []).append((r["concurrency"], r["calls_per_s"]))
    others = others or {}
    if not points and not others:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not installed: no plot (pip install -r requirements-test.txt)")
        return None
    fig, ax = plt.subplots(figsize=(8.5, 4.2), dpi=120)
    for name, xy in sorted(points.items()):
        xy.sort()
        ax.plot([x for x, _ in xy], [y for _, y in xy], marker="o", linewidth=2, label=name)
    for name, xy in sorted(others.items()):
        ax.plot([x for x, _ in xy], [y for _, y in xy], marker=".", linestyle="--", linewidth=1, label=name)
    ax.set_xscale("log", base=2)
    concurrencies = sorted({x for xy in [*points.values(), *others.values()] for x, _ in xy})
    ax.set_xticks(concurrencies, [str(c) for c in concurrencies])
    ax.set_xlabel("concurrent sessions (C)")
    ax.set_ylabel("calls/s (echo tool)")
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    args = parse_args(argv)
    fds = raise_fd_limit(max(4096, 2 * args.streams + 512))
    if "streams" in args.scenarios and fds < args.streams + 256:
        log(f"the open-files limit ({fds}) is too low for {args.streams} streams")
        return 2

    def on_term(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    others = compared(args.compare)  # read first: a wrong path fails before anything runs
    runner = Runner(args)
    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.monotonic()
    meta = {
        "started": started.isoformat(timespec="seconds"),
        "git": git_revision(),
        "db": args.db,
        "quick": args.quick,
        "cpus": os.cpu_count(),
        "server_cpu": runner.server_cpu,
        "client_cpu": runner.client_cpu,
        "python": platform.python_version(),
        "loadavg_start": os.getloadavg(),
        "args": {k: v for k, v in vars(args).items()},
        "compared_calls_per_s": others,
    }
    results = runner.run()
    meta["seconds"] = round(time.monotonic() - t0, 1)
    meta["loadavg_end"] = os.getloadavg()
    title = (f"django-mcp-transport {meta['git'] or ''}, {args.db}, python -m {args.launcher}"
             f"{''.join(f' (calls also {name})' for name in args.calls_also)}, "
             f"{'pinned' if runner.server_cpu is not None else 'not pinned'}, {started:%Y-%m-%d %H:%M} UTC")
    print(f"\n### Bench: {title}\n")
    print(table(results))
    problems = [p for r in results for p in correctness(r)]
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"meta": meta, "results": results, "problems": problems}, indent=1,
                                          default=str))
    plotted = plot(results, args.plot, title, others)
    print(f"\nJSON: {os.path.relpath(args.json)}" + (f"; plot: {os.path.relpath(plotted)}" if plotted else ""))
    if problems:
        print("\nCorrectness problems:\n" + "\n".join(f"- {p}" for p in problems))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
