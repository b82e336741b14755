"""What the `after_priming` disconnect policy costs a call: `python bench/after_priming.py [--quick]`.

One daphne serving the example project (SQLite) per setting: DISCONNECT_POLICY "never", then
"after_priming" with each RETRY_MS given. A 2025-11-25 client calls `slow_compute(seconds=D)` (a tool
that sleeps D, then answers) for each D, one call at a time, and does what a client must when the
server ends a connection before the response: it waits the `retry` the server announced, then
resumes with `GET` + `Last-Event-ID`, until the response arrives. Per call it counts the HTTP
requests (the POST and each resumption) and times it from the POST to the response.

Prints one markdown table: per setting and tool duration, the median HTTP requests per call and the
median and worst latency, and the latency added to the same call under "never". Timings are
reported, never asserted.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import httpx

if __package__ in (None, ""):  # run as a script: python bench/after_priming.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "bench"

from bench.server import BenchServer, databases  # noqa: E402

VERSION = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


class Client:
    """Just enough of a Streamable HTTP client: initialize, then calls resumed as the server asks."""

    def __init__(self, url: str):
        self.url = url
        self.http = httpx.Client(timeout=httpx.Timeout(60, connect=5))
        self.session = None
        self.ids = iter(range(1, 10**9))

    def headers(self, **extra) -> dict:
        headers = {"Accept": ACCEPT, "Content-Type": "application/json", "MCP-Protocol-Version": VERSION}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        return {**headers, **extra}

    def initialize(self):
        response = self.http.post(self.url, headers=self.headers(), json={
            "jsonrpc": "2.0", "id": next(self.ids), "method": "initialize",
            "params": {"protocolVersion": VERSION, "capabilities": {},
                       "clientInfo": {"name": "bench-after-priming", "version": "1"}}})
        response.raise_for_status()
        self.session = response.headers["mcp-session-id"]
        self.http.post(self.url, headers=self.headers(), json={"jsonrpc": "2.0", "method": "notifications/initialized"})

    def read(self, response, request_id) -> tuple[bool, str | None, int]:
        """One SSE connection: (got the response, last event id, retry ms)."""
        last_id, retry, data, answered = None, 1000, [], False
        for line in response.iter_lines():
            if line.startswith("id:"):
                last_id = line[3:].strip()
            elif line.startswith("retry:"):
                retry = int(line[6:].strip())
            elif line.startswith("data:"):
                data.append(line[5:].strip())
            elif line == "" and data:
                message = json.loads("\n".join(data)) if data != [""] else None
                data = []
                if isinstance(message, dict) and message.get("id") == request_id and "method" not in message:
                    answered = True
        return answered, last_id, retry

    def call(self, seconds: float) -> tuple[int, float]:
        """slow_compute(seconds), resumed until answered: (HTTP requests, seconds to the response)."""
        request_id = next(self.ids)
        body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                "params": {"name": "slow_compute", "arguments": {"seconds": seconds}}}
        start = time.perf_counter()
        with self.http.stream("POST", self.url, headers=self.headers(), json=body) as response:
            answered, last_id, retry = self.read(response, request_id)
        requests = 1
        while not answered:
            if last_id is None:
                raise RuntimeError("the server ended a stream with no event id to resume from")
            time.sleep(retry / 1000)
            resume = self.headers(**{"Last-Event-ID": last_id, "Accept": "text/event-stream"})
            with self.http.stream("GET", self.url, headers=resume) as response:
                answered, new_id, retry = self.read(response, request_id)
            last_id = new_id or last_id
            requests += 1
        return requests, time.perf_counter() - start


def measure(transport: dict, durations: list[float], repeats: int) -> dict[float, tuple[list[int], list[float]]]:
    with BenchServer(databases("sqlite"), transport=transport) as server:
        client = Client(server.url)
        client.initialize()
        client.call(0)  # warm-up
        results = {}
        for seconds in durations:
            calls = [client.call(seconds) for _ in range(repeats)]
            results[seconds] = ([c[0] for c in calls], [c[1] for c in calls])
        client.http.close()
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer durations and repeats (a smoke run)")
    parser.add_argument("--retry-ms", type=int, nargs="+", default=[1000, 200])
    args = parser.parse_args(argv)
    durations = [0.0, 0.2, 1.0] if args.quick else [0.0, 0.03, 0.1, 0.5, 1.0, 3.0]
    repeats = 2 if args.quick else 7
    settings = [("never", {"DISCONNECT_POLICY": "never"})]
    settings += [(f"after_priming, retry {r} ms", {"DISCONNECT_POLICY": "after_priming", "RETRY_MS": r})
                 for r in args.retry_ms]
    measured = {name: measure(transport, durations, repeats) for name, transport in settings}
    print("\n".join(table(measured)))
    return 0


def table(measured: dict) -> list[str]:
    """The markdown table of `measure`'s results by setting name ("never" first: the baseline)."""
    lines = ["| policy | tool takes | HTTP requests per call | latency median | latency max | added to never |",
             "|---|---|---|---|---|---|"]
    baseline = measured["never"]
    for name, results in measured.items():
        for seconds, (requests, latencies) in results.items():
            median = statistics.median(latencies)
            added = "" if name == "never" else f"{(median - statistics.median(baseline[seconds][1])) * 1000:+.0f} ms"
            lines.append(f"| {name} | {seconds * 1000:.0f} ms | {statistics.median(requests):g} | "
                         f"{median * 1000:.0f} ms | {max(latencies) * 1000:.0f} ms | {added} |")
    return lines


if __name__ == "__main__":
    sys.exit(main())
