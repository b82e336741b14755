"""This project beside the official MCP SDKs, measured in one run by one client: `make yardstick`.

Everything comes from this repository and the package registries: the anchor servers are
bench/anchors/ (the official Python SDK on uvicorn, the official TypeScript SDK on node, both
pinned and installed by bench/anchors/install.sh), the floor is bench/floor.py (a bare ASGI app
under the same launcher as the project), and the load client is the bench's own (bench/client.py,
bench/scenarios.py, as `make bench` uses it). The example project is served by
`python -m mcp_transport.serve` (`ours-sqlite-*`: SQLite; `ours-pg-*`: PostgreSQL + Redis,
example_project.settings_scaled), `-json` with JSON_RESPONSE = True; `ours-sqlite-sse-daphne` is
`ours-sqlite-sse` under plain daphne.

MCP 2026-07-28 (`*-modern-*` rows): stateless calls, each POST with its `_meta` envelope and the
Mcp-* headers, against the official Python SDK 2.x (`py2-modern`), the TypeScript server SDK 2.x
(`ts2-modern`) and the example project with its defaults (`ours-modern`, SQLite: the modern path
stores nothing). `-json` calls echo (answered with JSON), `-sse` calls progress(3, delay=0) with a
progress token (three notifications, then the result, on an SSE stream without event ids). Every
answer is checked: the text, `resultType: complete`, the notifications in order, no session id.

Each server is started fresh for each repeat, pinned to the first CPU with the client on the
second; the repeats are interleaved (server after server, the order rotated each repeat) so that a
slow minute of a shared machine falls on every server alike. Medians of the repeats are compared.

    python bench/yardstick.py                                   # calls, streams, resume; 3 repeats
    python bench/yardstick.py --scenarios calls --reps 5 --servers py-sse,ts-sse,ours-sqlite-sse

Writes test-output/yardstick.jsonl (every result, and the machine's facts), test-output/yardstick.md
(the tables printed) and the plot. Exits 1 when one of this project's runs is wrong (errors, events
lost, duplicated or out of order); the anchors' losses are findings, not failures.
"""
from __future__ import annotations

import argparse
import asyncio
import datetime
import importlib.metadata
import json
import os
import platform
import signal
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "bench"

from bench import anchors, scenarios  # noqa: E402
from bench.run import git_revision, log_problems, plot, raise_fd_limit  # noqa: E402
from bench.server import APP, FLOOR, ROOT, BenchServer, databases, pinning  # noqa: E402

ANCHORS = ("py-sse", "py-json", "ts-sse", "ts-json")
FLOORS = ("floor",)
OURS = ("ours-sqlite-sse", "ours-sqlite-json", "ours-pg-sse", "ours-pg-json", "ours-sqlite-sse-daphne")
# The 2026-07-28 rows: (the server that serves them, the tool each call calls). "ours" is the example
# project with its default settings on SQLite.
MODERN = {
    "py2-modern-json": ("py2-modern", "echo"),
    "py2-modern-sse": ("py2-modern", "progress"),
    "ts2-modern-json": ("ts2-modern", "echo"),
    "ts2-modern-sse": ("ts2-modern", "progress"),
    "ours-modern-json": ("ours", "echo"),
    "ours-modern-sse": ("ours", "progress"),
}
SERVERS = ANCHORS + FLOORS + OURS + tuple(MODERN)
# A calls run during which everything else on the host used more than this (% of one CPU) is disturbed.
DISTURBED_PCT = 25.0
WHAT = {
    "py-sse": "official Python SDK, SSE answers",
    "py-json": "official Python SDK, JSON answers",
    "ts-sse": "official TypeScript SDK, SSE answers",
    "ts-json": "official TypeScript SDK, JSON answers",
    "floor": "bare ASGI app (bench/floor.py), stores nothing",
    "ours-sqlite-sse": "this project, SQLite, SSE answers",
    "ours-sqlite-json": "this project, SQLite, JSON answers",
    "ours-pg-sse": "this project, PostgreSQL + Redis, SSE answers",
    "ours-pg-json": "this project, PostgreSQL + Redis, JSON answers",
    "ours-sqlite-sse-daphne": "ours-sqlite-sse under plain daphne",
    "py2-modern-json": "official Python SDK 2.x, 2026-07-28, echo (JSON answers)",
    "py2-modern-sse": "official Python SDK 2.x, 2026-07-28, progress(3) (SSE answers)",
    "ts2-modern-json": "official TypeScript SDK 2.x, 2026-07-28, echo (JSON answers)",
    "ts2-modern-sse": "official TypeScript SDK 2.x, 2026-07-28, progress(3) (SSE answers)",
    "ours-modern-json": "this project, 2026-07-28, echo (JSON answers)",
    "ours-modern-sse": "this project, 2026-07-28, progress(3) (SSE answers)",
}
SCENARIOS = ("calls", "streams", "resume")
# Held streams and resumption: the servers with a GET stream and a progress tool, one per kind
# (the -json and -daphne variants hold streams and resume as their -sse twin does).
STREAMS_ON = ("py-sse", "ts-sse", "floor", "ours-sqlite-sse", "ours-pg-sse")
RESUME_ON = ("py-sse", "ts-sse", "ours-sqlite-sse", "ours-pg-sse")


def log(*parts):
    print(time.strftime("[%H:%M:%S]"), *parts, file=sys.stderr, flush=True)


# Servers

class Ours:
    """The example project (or the floor) as BenchServer serves it."""

    def __init__(self, name: str, dbs: dict, cpu: int | None):
        app = FLOOR if name in FLOORS else APP
        db = dbs.get("postgres" if "-pg-" in name else "sqlite")
        # The modern rows run the defaults: JSON_RESPONSE would drop the notifications.
        transport = {"JSON_RESPONSE": True} if name.endswith("-json") and name not in MODERN else {}
        launcher = "daphne" if name.endswith("-daphne") else "mcp_transport.serve"
        self.server = BenchServer(db, transport, cpu, launcher=launcher, app=app)

    url = property(lambda self: self.server.url)
    pid = property(lambda self: self.server.pid)
    log_path = property(lambda self: self.server.log_path)

    def start(self):
        self.server.start()
        return self

    def stop(self):
        self.server.stop()

    def logs(self) -> str:
        return self.server.logs()

    def remove_log(self):
        self.server.remove_log()


def process(name: str) -> str:
    """The server a row runs on: an anchor's name, or the row's own."""
    return MODERN[name][0] if name in MODERN and MODERN[name][0] != "ours" else name


def load(name: str) -> dict:
    """The calls a row makes: its era and tool (scenarios.calls' arguments)."""
    return {"era": "modern", "tool": MODERN[name][1]} if name in MODERN else {}


def needs_sqlite(name: str) -> bool:
    return "-sqlite-" in name or name in MODERN and MODERN[name][0] == "ours"


def serve(name: str, args):
    if process(name) in anchors.ANCHORS:
        return anchors.AnchorServer(process(name), args.paths, args.server_cpu).start()
    return Ours(name, args.dbs, args.server_cpu).start()


def rotated(items: list, rep: int) -> list:
    """The servers in the order of repeat `rep` (from 1): each repeat starts further along."""
    if not items:
        return items
    shift = ((rep - 1) * max(1, len(items) // 3)) % len(items)
    return items[shift:] + items[:shift]


# Runs

def machine() -> dict:
    """What the run ran on, as measured now."""
    facts = {"cpus": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                facts["cpu_model"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                facts["mem_gb"] = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    for package in ("django", "channels", "daphne", "twisted", "channels-redis", "redis", "psycopg"):
        try:
            facts[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    return facts


def service_versions(dbs: dict) -> dict:
    out = {}
    if "postgres" in dbs:
        try:
            import psycopg

            with psycopg.connect(dbname="postgres", connect_timeout=10, **dbs["postgres"].pg) as conn:
                out["postgresql"] = conn.execute("SHOW server_version").fetchone()[0]
        except Exception as exc:  # noqa: BLE001 (a fact missing from the report, not a failure)
            out["postgresql"] = f"? ({exc})"
        try:
            import redis

            client = redis.Redis.from_url(os.environ.get("MCP_REDIS_URL", "redis://127.0.0.1:6379/0"), socket_timeout=5)
            out["redis_server"] = client.info("server")["redis_version"]
            client.close()
        except Exception as exc:  # noqa: BLE001
            out["redis_server"] = f"? ({exc})"
    return out


class Run:
    def __init__(self, args):
        self.args = args
        self.results: list[dict] = []

    def record(self, result: dict):
        self.results.append(result)
        with open(self.args.out, "a") as f:
            f.write(json.dumps(result, default=str) + "\n")
        wrong = problems([result])
        if wrong:
            log("WRONG:", *wrong)

    def against(self, name: str, scenario: str, measure, **labels):
        """Start `name`, run `measure(server)` (a coroutine function returning a dict or a list of
        dicts), stop it; every result labelled with the server and `labels`."""
        try:
            server = serve(name, self.args)
        except Exception as exc:  # noqa: BLE001 (reported; the other servers still run)
            self.record({"server": name, "scenario": scenario, **labels,
                         "error": f"did not start: {str(exc).strip().splitlines()[-1][:300]}"})
            return
        try:
            out = asyncio.run(measure(server))
        except Exception as exc:  # noqa: BLE001
            out = {"scenario": scenario, "error": scenarios.short(exc)}
        finally:
            server.stop()
        logs = server.logs()
        for r in out if isinstance(out, list) else [out]:
            self.record({"server": name, **labels, **r})
        if self.args.keep_logs or (name.startswith("ours-") and log_problems(logs)):
            log(f"{name}: log kept in {server.log_path}")
        else:
            server.remove_log()

    def calls(self):
        a = self.args
        for rep in range(1, a.reps + 1):
            for name in rotated(a.servers, rep):
                async def measure(server, name=name, rep=rep):
                    # A fresh process first serves unmeasured calls: the TypeScript SDK's JIT needs
                    # seconds of load to reach its pace (the first seconds run at a third of it).
                    if a.server_warmup:
                        await scenarios.calls(server.url, concurrency=a.cs[0], duration=a.server_warmup, warmup=0,
                                              **load(name))
                    out = []
                    for c in a.cs:
                        log(f"calls {name} C={c} repeat {rep}/{a.reps}")
                        out.append(await scenarios.calls(server.url, concurrency=c, duration=a.duration,
                                                         warmup=a.warmup, pid=server.pid, **load(name)))
                    return out

                self.against(name, "calls", measure, rep=rep)

    def streams(self):
        a = self.args
        for name in [s for s in a.servers if s in STREAMS_ON]:
            log(f"streams {name} S={a.streams}")
            self.against(name, "streams", lambda server: scenarios.streams(
                server.url, count=a.streams, hold=a.hold, pid=server.pid))

    def resume(self):
        a = self.args
        for name in [s for s in a.servers if s in RESUME_ON]:
            log(f"resume {name} K={a.resume_count} x{a.resume_repeats}")
            self.against(name, "resume", lambda server: scenarios.resume(
                server.url, count=a.resume_count, delays=a.delays, repeats=a.resume_repeats,
                timeout=a.resume_timeout))

    def run(self) -> list[dict]:
        for scenario in SCENARIOS:
            if scenario in self.args.scenarios:
                getattr(self, scenario)()
        return self.results


# Reporting

def problems(results: list[dict]) -> list[str]:
    """What is wrong in this project's results (the anchors' are reported, not judged)."""
    wrong = []
    for r in results:
        name = r.get("server", "?")
        if not name.startswith("ours-"):
            continue
        if r.get("error"):
            wrong.append(f"{name} {r.get('scenario')}: {r['error']}")
        elif r["scenario"] == "calls" and (r["errors"] or r["wrong_results"] or not r["calls"]):
            wrong.append(f"{name} calls C={r['concurrency']}: {r['errors']} errors, {r['wrong_results']} wrong "
                         f"{r['error_samples']}")
        elif r["scenario"] == "streams" and (not r["all_held"] or r["errors"] or r["ended_on_delete"] != r["opened"]):
            wrong.append(f"{name} streams: {r['held']} of {r['streams']} held, {r['errors']} errors, "
                         f"{r['ended_on_delete']} ended on DELETE {r['error_samples']}")
        elif r["scenario"] == "resume" and not r["ok"]:
            wrong.append(f"{name} resume: {r['lost_total']} lost, {r['duplicated_total']} duplicated, "
                         f"{r['out_of_order_total']} out of order, {r['missing_response_total']} without response")
    return wrong


def n(value, digits=0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def calls_runs(results) -> dict[tuple[str, int], list[dict]]:
    runs: dict[tuple[str, int], list[dict]] = {}
    for r in results:
        if r.get("scenario") == "calls" and r.get("calls_per_s") is not None:
            runs.setdefault((r["server"], r["concurrency"]), []).append(r)
    return runs


def medians(results) -> dict[tuple[str, int], float]:
    return {key: statistics.median(r["calls_per_s"] for r in runs) for key, runs in calls_runs(results).items()}


def median_run(runs: list[dict]) -> dict:
    """The repeat whose calls/s is the median (the lower middle one for an even count)."""
    ordered = sorted(runs, key=lambda r: r["calls_per_s"])
    return ordered[(len(ordered) - 1) // 2]


def by_server(results, scenario: str) -> dict[str, dict]:
    return {r["server"]: r for r in results if r.get("scenario") == scenario and not r.get("error")}


def resume_totals(r: dict) -> tuple[int, int, int, int]:
    """(lost, duplicated, out of order, notifications expected) over every mode and delay."""
    expected = sum(row["runs"] for row in r["results"]) * r["count"]
    return r["lost_total"], r["duplicated_total"], r["out_of_order_total"], expected


def after_ms(r: dict) -> list[float]:
    return [row["reconnect_to_done_ms_p50"] for row in r["results"]
            if row["mode"] == "after" and row["reconnect_to_done_ms_p50"] is not None]


def cpu_medians(results) -> dict[tuple[str, int], float]:
    """The server's CPU per call (ms), median of the repeats."""
    out = {}
    for key, runs in calls_runs(results).items():
        values = [r["server_cpu_ms_per_call"] for r in runs if r.get("server_cpu_ms_per_call") is not None]
        if values:
            out[key] = statistics.median(values)
    return out


def other_load(results, names, cs: list[int] | None = None) -> float:
    """The most everything else on the host used (% of one CPU) during the measured calls runs of
    `names` (at the concurrencies `cs`, or all)."""
    values = [r.get("host_other_cpu_pct") or 0 for (name, c), runs in calls_runs(results).items()
              if name in names and (cs is None or c in cs) for r in runs]
    return max(values, default=0.0)


def side_by_side(results, servers: list[str], cs: list[int]) -> str:
    """The one table: calls/s (medians), CPU per call, latency, memory per held stream, resume losses."""
    m, runs, cpu = medians(results), calls_runs(results), cpu_medians(results)
    streams, resumes = by_server(results, "streams"), by_server(results, "resume")
    header = ["server", "what"] + [f"calls/s C={c}" for c in cs] + [
        "server CPU ms per call, C=" + " / ".join(str(c) for c in cs),
        f"p50 / p99 ms C={cs[0]}", "KB per held session+stream", "resume: lost / dup / out of order",
        "replay after reconnect, ms"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name in servers:
        cells = [name, WHAT.get(name, "")]
        cells += [n(m.get((name, c))) for c in cs]
        cells.append(" / ".join(n(cpu.get((name, c)), 3) for c in cs))
        first = runs.get((name, cs[0]))
        cells.append(f"{n(median_run(first)['p50_ms'], 1)} / {n(median_run(first)['p99_ms'], 1)}" if first else "-")
        s = streams.get(name)
        cells.append(f"{n(s['kb_per_session_plus_stream'], 1)} ({n(s['held'])} held)" if s else "-")
        r = resumes.get(name)
        if r:
            lost, dup, ooo, expected = resume_totals(r)
            cells.append(f"{lost} / {dup} / {ooo} of {expected:,}")
            ms_after = after_ms(r)
            cells.append(f"{min(ms_after):.1f}-{max(ms_after):.1f}" if ms_after else "-")
        else:
            cells += ["-", "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def calls_table(results, servers: list[str], cs: list[int]) -> str:
    """Every repeat: calls/s, the median repeat's latency, server CPU, the rest of the host's CPU."""
    runs = calls_runs(results)
    lines = ["| server | C | calls/s, each repeat | median | p50 / p99 ms | server CPU % | server CPU ms/call | "
             "client CPU % | other CPU % (max) |", "|---|---|---|---|---|---|---|---|---|"]
    for name in servers:
        for c in cs:
            rs = runs.get((name, c))
            if not rs:
                continue
            rs = sorted(rs, key=lambda r: r["rep"])
            mid = median_run(rs)
            lines.append(
                f"| {name} | {c} | {' / '.join(n(r['calls_per_s']) for r in rs)} | "
                f"{n(statistics.median(r['calls_per_s'] for r in rs))} | "
                f"{n(mid['p50_ms'], 1)} / {n(mid['p99_ms'], 1)} | "
                f"{' / '.join(n(r.get('server_cpu_pct')) for r in rs)} | "
                f"{' / '.join(n(r.get('server_cpu_ms_per_call'), 3) for r in rs)} | {n(mid.get('client_cpu_pct'))} | "
                f"{n(max((r.get('host_other_cpu_pct') or 0) for r in rs))} |")
    return "\n".join(lines)


def ratios_table(results, cs: list[int]) -> str:
    m = medians(results)
    against = [a for a in ANCHORS + FLOORS if any((a, c) in m for c in cs)]
    lines = ["| ours | C | calls/s | " + " | ".join(f"/ {a}" for a in against) + " |",
             "|---|---|---|" + "---|" * len(against)]
    for name in OURS:
        for c in cs:
            if (name, c) in m:
                cells = [f"{m[(name, c)] / m[(a, c)]:.2f}x" if m.get((a, c)) else "-" for a in against]
                lines.append(f"| {name} | {c} | {n(m[(name, c)])} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def modern_ratios_table(results, cs: list[int]) -> str:
    """2026-07-28: this project's calls/s over each SDK's, the same calls (JSON echo, SSE progress); and
    each SDK's server CPU per call over this project's (how many times the CPU it spends on a call)."""
    m, cpu = medians(results), cpu_medians(results)
    lines = ["| calls | C | ours calls/s | / Python SDK 2.x | / TypeScript SDK 2.x | ours CPU ms/call | "
             "Python SDK 2.x CPU / ours | TypeScript SDK 2.x CPU / ours |", "|---|---|---|---|---|---|---|---|"]
    for kind in ("json", "sse"):
        for c in cs:
            key = (f"ours-modern-{kind}", c)
            if not m.get(key):
                continue
            cells = [f"{m[key] / m[(f'{sdk}-modern-{kind}', c)]:.2f}x" if m.get((f"{sdk}-modern-{kind}", c)) else "-"
                     for sdk in ("py2", "ts2")]
            cells.append(n(cpu.get(key), 3))
            cells += [f"{cpu[(f'{sdk}-modern-{kind}', c)] / cpu[key]:.2f}x"
                      if cpu.get(key) and cpu.get((f"{sdk}-modern-{kind}", c)) else "-" for sdk in ("py2", "ts2")]
            lines.append(f"| {kind.upper()} | {c} | {n(m[key])} | " + " | ".join(cells) + " |")
    return "\n".join(lines) if len(lines) > 2 else ""


def streams_table(results) -> str:
    lines = ["| server | held | KB/session | KB/stream | KB/(session+stream) | RSS before -> peak MB | idle CPU % | "
             "ended on DELETE |", "|---|---|---|---|---|---|---|---|"]
    for name, r in by_server(results, "streams").items():
        rss = r["rss_kb"]
        lines.append(f"| {name} | {n(r['held'])} of {n(r['streams'])} | {n(r['kb_per_session'], 1)} | "
                     f"{n(r['kb_per_stream'], 1)} | {n(r['kb_per_session_plus_stream'], 1)} | "
                     f"{n((rss.get('before') or 0) / 1024)} -> {n((r['server_rss_kb'] or 0) / 1024)} | "
                     f"{n(r['idle_server_cpu_pct'], 1)} | {n(r['ended_on_delete'])} |")
    return "\n".join(lines)


def resume_table(results) -> str:
    lines = ["| server | delay s | mode | runs | lost | dup | out of order | no response | reconnect->done ms "
             "(p50 / max) |", "|---|---|---|---|---|---|---|---|---|"]
    for name, r in by_server(results, "resume").items():
        for row in r["results"]:
            lines.append(f"| {name} | {row['delay']:g} | {row['mode']} | {row['runs']} | {row['lost']} | "
                         f"{row['duplicated']} | {row['out_of_order']} | {row['missing_response']} | "
                         f"{n(row['reconnect_to_done_ms_p50'], 1)} / {n(row['reconnect_to_done_ms_max'], 1)} |")
    return "\n".join(lines)


def targets(results, cs: list[int]) -> list[tuple[str, str, str]]:
    """The performance targets this run measures: (target, measured, met). A calls target whose runs
    were disturbed (everything else on the host above DISTURBED_PCT of a CPU) is not claimed."""
    m = medians(results)
    out = []

    def ratio_target(ours: str, anchor: str, floor: float, label: str):
        values = [(c, m[(ours, c)] / m[(anchor, c)]) for c in cs if m.get((ours, c)) and m.get((anchor, c))]
        if values:
            met = "yes" if all(v >= floor for _, v in values) else "no"
            other = other_load(results, (ours, anchor), [c for c, _ in values])
            if other > DISTURBED_PCT:
                met = f"not claimed: disturbed (other load up to {other:.0f} % of a CPU; on these figures {met})"
            out.append((label, " / ".join(f"{v:.2f}x (C={c})" for c, v in values), met))

    for db, label in (("sqlite", "SQLite"), ("pg", "PostgreSQL")):
        ratio_target(f"ours-{db}-sse", "py-sse", 2.5, f"SSE calls, {label}, >= 2.5x py-sse")
        ratio_target(f"ours-{db}-sse", "ts-sse", 0.8, f"SSE calls, {label}, >= 0.8x ts-sse")
        ratio_target(f"ours-{db}-json", "py-json", 1.5, f"JSON calls, {label}, >= 1.5x py-json")
    for kind, label in (("json", "JSON (echo)"), ("sse", "SSE (progress(3))")):
        ratio_target(f"ours-modern-{kind}", f"py2-modern-{kind}", 2.0,
                     f"2026-07-28 {label} calls >= 2x the Python SDK 2.x")
        ratio_target(f"ours-modern-{kind}", f"ts2-modern-{kind}", 1.0,
                     f"2026-07-28 {label} calls >= 1x the TypeScript SDK 2.x")
    streams = by_server(results, "streams")
    for name in ("ours-sqlite-sse", "ours-pg-sse"):
        s = streams.get(name)
        if s and s["kb_per_session_plus_stream"] is not None:
            out.append((f"<= 25 KB per held session + GET stream ({name})",
                        f"{s['kb_per_session_plus_stream']:.1f} KB, {s['held']} of {s['streams']} held",
                        "yes" if s["kb_per_session_plus_stream"] <= 25 and s["all_held"] else "no"))
    resumes = by_server(results, "resume")
    for name in ("ours-sqlite-sse", "ours-pg-sse"):
        r = resumes.get(name)
        if r:
            lost, dup, ooo, expected = resume_totals(r)
            out.append((f"resume: 0 lost / duplicated / out of order ({name})",
                        f"{lost} / {dup} / {ooo} of {expected:,}", "yes" if r["ok"] else "no"))
            py = resumes.get("py-sse")
            if py and after_ms(r) and after_ms(py):
                ours_ms, py_ms = statistics.median(after_ms(r)), statistics.median(after_ms(py))
                out.append((f"resume: replay after reconnect no slower than py-sse's from memory ({name})",
                            f"{ours_ms:.1f} ms against {py_ms:.1f} ms ({ours_ms / py_ms:.2f}x)",
                            "yes" if ours_ms <= py_ms else "no"))
    return out


def targets_table(rows) -> str:
    return "\n".join(["| target | measured | met |", "|---|---|---|"] +
                     [f"| {t} | {measured} | {met} |" for t, measured, met in rows])


def facts_line(meta: dict) -> str:
    f = meta["machine"]
    parts = [f"{f.get('cpus')} CPUs ({f.get('cpu_model', '?')}), {f.get('mem_gb', '?')} GB, Linux {f.get('kernel')}",
             f"server on CPU {meta['server_cpu']}, client on CPU {meta['client_cpu']}" if meta["server_cpu"] is not None
             else "not pinned",
             f"Python {f.get('python')}, Django {f.get('django')}, daphne {f.get('daphne')}, "
             f"Twisted {f.get('twisted')}, "
             f"channels {f.get('channels')}, channels-redis {f.get('channels-redis')}, redis-py {f.get('redis')}, "
             f"psycopg {f.get('psycopg')}"]
    services = meta.get("services", {})
    if services:
        parts.append(f"PostgreSQL {services.get('postgresql')}, Redis {services.get('redis_server')} on the same host")
    anchor = meta.get("anchors", {})
    if "anchor_python" in anchor:
        py, mcp, uvicorn = (anchor["anchor_python"].split() + ["?", "?", "?"])[:3]
        parts.append(f"Python SDK: mcp {mcp}, uvicorn {uvicorn} (Python {py})")
    if "anchor_python_modern" in anchor:
        py, mcp, uvicorn = (anchor["anchor_python_modern"].split() + ["?", "?", "?"])[:3]
        parts.append(f"Python SDK 2.x: mcp {mcp}, uvicorn {uvicorn} (Python {py})")
    if "anchor_node" in anchor:
        node, sdk = (anchor["anchor_node"].split() + ["?", "?"])[:2]
        parts.append(f"TypeScript SDK: @modelcontextprotocol/sdk {sdk} (Node {node.lstrip('v')})")
    if "anchor_node_modern" in anchor:
        node, sdk = (anchor["anchor_node_modern"].split() + ["?", "?"])[:2]
        parts.append(f"TypeScript SDK 2.x: @modelcontextprotocol/server {sdk} (Node {node.lstrip('v')})")
    a = meta["args"]
    parts.append(f"{a['reps']} repeats interleaved, each server started afresh for each and warmed with "
                 f"{a['server_warmup']:g} s of calls, then {a['warmup']:g} s + {a['duration']:g} s measured per "
                 f"calls run; load average {meta['loadavg_start'][0]:.2f} at the start, "
                 f"{meta['loadavg_end'][0]:.2f} at the end")
    return "; ".join(parts) + "."


def host_load(results, servers: list[str]) -> str:
    """What else the host ran during the measured calls runs, and whether that disturbed them."""
    worst = {name: other_load(results, (name,)) for name in servers
             if any(key[0] == name for key in calls_runs(results))}
    if not worst:
        return ""
    each = ", ".join(f"{name} {value:.0f}" for name, value in worst.items())
    disturbed = [name for name, value in worst.items() if value > DISTURBED_PCT]
    verdict = (f"disturbed (above {DISTURBED_PCT:g} %): {', '.join(disturbed)}; the targets those rows feed are "
               "not claimed" if disturbed else f"no row above {DISTURBED_PCT:g} %: undisturbed")
    return (f"Host load besides the bench (% of one CPU that everything else used, the most in any measured "
            f"calls run of the row): {each}. {verdict[0].upper()}{verdict[1:]}.")


def report(results: list[dict], meta: dict, servers: list[str], cs: list[int]) -> str:
    out = [f"## Side by side: {meta['git'] or '?'}, {meta['started']}", "", facts_line(meta), "",
           side_by_side(results, servers, cs), ""]
    load_line = host_load(results, servers)
    if load_line:
        out += [load_line, ""]
    rows = targets(results, cs)
    if rows:
        out += ["### Targets", "", targets_table(rows), ""]
    if calls_runs(results):
        out += ["### calls (echo tool; `*-modern-sse`: progress(3))", "", calls_table(results, servers, cs), ""]
        if any(name in OURS for name, _ in calls_runs(results)):
            out += ["### ratios (medians)", "", ratios_table(results, cs), ""]
        modern = modern_ratios_table(results, cs)
        if modern:
            out += ["### 2026-07-28 ratios (medians)", "", modern, ""]
    if by_server(results, "streams"):
        out += ["### streams (held GET streams; RSS from /proc)", "", streams_table(results), ""]
    if by_server(results, "resume"):
        out += [f"### resume (K={meta['args']['resume_count']}; the POST stream dropped after the first "
                "notification; `live`: reconnect while the tool runs, `after`: once it finished)", "",
                resume_table(results), ""]
    failed = [f"- {r['server']} {r.get('scenario')}: {r['error']}" for r in results if r.get("error")]
    if failed:
        out += ["### did not run", "", *failed, ""]
    return "\n".join(out)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", default=",".join(SERVERS), help=f"comma-separated, of {', '.join(SERVERS)}")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"comma-separated, of {', '.join(SCENARIOS)}")
    parser.add_argument("--cs", default="16,64", help="calls: concurrent sessions, comma-separated")
    parser.add_argument("--reps", type=int, default=3, help="calls: interleaved repeats")
    parser.add_argument("--duration", type=float, default=8, help="calls: seconds measured per run")
    parser.add_argument("--server-warmup", type=float, default=5,
                        help="calls: seconds of unmeasured load on each freshly started server")
    parser.add_argument("--warmup", type=float, default=1, help="calls: seconds of load before each measured run")
    parser.add_argument("--streams", type=int, default=1000, help="streams: held GET streams")
    parser.add_argument("--hold", type=float, default=5, help="streams: seconds to hold them")
    parser.add_argument("--resume-count", type=int, default=50, help="resume: notifications per call")
    parser.add_argument("--resume-repeats", type=int, default=20, help="resume: runs per mode and delay")
    parser.add_argument("--delays", default="0.02,0.001,0", help="resume: seconds between notifications")
    parser.add_argument("--resume-timeout", type=float, default=5,
                        help="resume: seconds a run waits for its response (a server that lost it costs this)")
    parser.add_argument("--no-pin", action="store_true", help="do not pin the servers and the client to CPUs")
    parser.add_argument("--keep-logs", action="store_true", help="keep every server's log")
    parser.add_argument("--out", type=Path, default=ROOT / "test-output/yardstick.jsonl")
    parser.add_argument("--markdown", type=Path, default=ROOT / "test-output/yardstick.md")
    parser.add_argument("--plot", default=str(ROOT / "test-output/yardstick-calls.png"))
    parser.add_argument("--report", type=Path, metavar="FILE.jsonl",
                        help="run nothing: print (and write to --markdown, and plot to --plot) the tables of a "
                             "finished run's JSON lines")
    args = parser.parse_args(argv)
    args.servers = [s for s in args.servers.split(",") if s]
    args.scenarios = [s for s in args.scenarios.split(",") if s]
    args.cs = [int(c) for c in args.cs.split(",") if c]
    args.delays = [float(d) for d in args.delays.split(",") if d]
    for what, given, known in (("servers", args.servers, SERVERS), ("scenarios", args.scenarios, SCENARIOS)):
        if set(given) - set(known):
            parser.error(f"unknown {what}: {', '.join(sorted(set(given) - set(known)))}")
    return args


def plot_medians(results: list[dict], meta: dict, path: str) -> str | None:
    """calls/s against concurrency, the medians: this project's rows solid, the others dashed."""
    ours, others = [], {}
    for (name, c), value in sorted(medians(results).items()):
        if name.startswith("ours-"):
            mode = name.removeprefix("ours-").replace("-", " ").replace("modern ", "2026-07-28 ")
            ours.append({"scenario": "calls", "calls_per_s": value, "concurrency": c, "mode": mode})
        else:
            others.setdefault(name, []).append((c, value))
    return plot(ours, path, f"calls/s, medians of {meta['args']['reps']} interleaved repeats, {meta['started']}",
                others)


def rerender(path: Path, markdown: Path, plot_path: str | None = None) -> int:
    """The tables again from a run's JSON lines (`--report`), e.g. after a change to the reporting."""
    results, meta = [], None
    for line in path.read_text().splitlines():
        item = json.loads(line)
        if "meta" in item:
            meta = item["meta"]
        else:
            results.append(item)
    if meta is None:
        raise SystemExit(f"{path}: no meta line (the run did not finish)")
    text = report(results, meta, meta["args"]["servers"], meta["args"]["cs"])
    print(text)
    markdown.parent.mkdir(parents=True, exist_ok=True)
    markdown.write_text(text + "\n")
    if plot_path:
        plot_medians(results, meta, plot_path)
    return 1 if problems(results) else 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.report:
        return rerender(args.report, args.markdown, args.plot)
    raise_fd_limit(max(4096, 2 * args.streams + 512))
    args.server_cpu, client_cpu = (None, None) if args.no_pin else pinning()
    if client_cpu is not None:
        os.sched_setaffinity(0, {client_cpu})
    wanted = anchors.parts(process(s) for s in args.servers)
    args.paths = {}
    if wanted:
        log("installing the anchors (bench/anchors/install.sh; at once when up to date)")
        args.paths = anchors.install(wanted)
    args.dbs = {}
    started = datetime.datetime.now(datetime.timezone.utc)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("")
    try:
        if any("-pg-" in s for s in args.servers):
            args.dbs["postgres"] = databases("postgres")
        if any(needs_sqlite(s) for s in args.servers):
            args.dbs["sqlite"] = databases("sqlite")
        meta = {"started": f"{started:%Y-%m-%d %H:%M} UTC", "git": git_revision(), "machine": machine(),
                "services": service_versions(args.dbs), "anchors": anchors.versions(args.paths),
                "server_cpu": args.server_cpu, "client_cpu": client_cpu, "loadavg_start": os.getloadavg(),
                "args": {k: v for k, v in vars(args).items() if k not in ("dbs", "paths")}}
        t0 = time.monotonic()
        results = Run(args).run()
    finally:
        for d in args.dbs.values():
            d.close()
    meta["loadavg_end"] = os.getloadavg()
    meta["seconds"] = round(time.monotonic() - t0)
    with open(args.out, "a") as f:
        f.write(json.dumps({"meta": meta}, default=str) + "\n")
    text = report(results, meta, args.servers, args.cs)
    print(text)
    args.markdown.parent.mkdir(parents=True, exist_ok=True)
    args.markdown.write_text(text + "\n")
    plotted = plot_medians(results, meta, args.plot)
    log(f"results: {args.out}; tables: {args.markdown}" + (f"; plot: {plotted}" if plotted else "")
        + f"; {meta['seconds']} s")
    wrong = problems(results)
    if wrong:
        print("\nWrong:\n" + "\n".join(f"- {w}" for w in wrong))
    return 1 if wrong else 0


if __name__ == "__main__":
    def on_term(signum, frame):
        raise SystemExit(128 + signum)  # stop the servers and drop the databases on the way out

    signal.signal(signal.SIGTERM, on_term)
    sys.exit(main())
