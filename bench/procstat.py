"""CPU time and memory of a process, and the host's busy time, from /proc (Linux)."""
from __future__ import annotations

import os
import time

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int | str = "self") -> float | None:
    """utime + stime of a process (all its threads), in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # After "pid (comm)": state is fields[0]; utime and stime are fields 14 and 15 of the line.
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_kb(pid: int | str = "self") -> int | None:
    """VmRSS of a process in KB."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def open_fds(pid: int | str = "self") -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def host_busy_seconds() -> float | None:
    """CPU time spent by everything on the host (all cores), in seconds."""
    try:
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return (sum(values[:8]) - idle) / CLK_TCK


class CPUWindow:
    """CPU % of the server, of this client and of everything else over a time window (100 = one core)."""

    def __init__(self, server_pid: int | None):
        self.pid = server_pid
        self.t0 = time.monotonic()
        self.server0 = cpu_seconds(server_pid) if server_pid else None
        self.client0 = cpu_seconds()
        self.host0 = host_busy_seconds()

    def stop(self) -> dict:
        wall = max(time.monotonic() - self.t0, 1e-9)
        out = {}
        server = cpu_seconds(self.pid) if self.pid else None
        client = cpu_seconds()
        host = host_busy_seconds()
        server_s = (server - self.server0) if server is not None and self.server0 is not None else None
        client_s = (client - self.client0) if client is not None and self.client0 is not None else None
        out["server_cpu_pct"] = round(100 * server_s / wall, 1) if server_s is not None else None
        out["client_cpu_pct"] = round(100 * client_s / wall, 1) if client_s is not None else None
        if host is not None and self.host0 is not None and server_s is not None and client_s is not None:
            other = (host - self.host0) - server_s - client_s
            out["host_other_cpu_pct"] = round(max(0.0, 100 * other / wall), 1)
        out["server_cpu_s"] = round(server_s, 3) if server_s is not None else None
        return out
