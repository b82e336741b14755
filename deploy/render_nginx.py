#!/usr/bin/env python3
"""Fill in deploy/nginx.conf: where nginx listens and the daphne workers behind it.

    python3 deploy/render_nginx.py --listen 127.0.0.1:8080 \
        --worker 127.0.0.1:8001 --worker 127.0.0.1:8002 > /path/to/nginx.conf

Standard library only; deploy/run.sh and tests/test_deploy.py use it.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parent / "nginx.conf"
ADDRESS = re.compile(r"^[A-Za-z0-9.\-\[\]:]+:\d{1,5}$")


def render(listen: str, workers: list[str], template: str | None = None) -> str:
    """The template with `@LISTEN@` and `@UPSTREAM_SERVERS@` replaced."""
    if not workers:
        raise ValueError("at least one worker is needed")
    for address in [listen, *workers]:
        if not ADDRESS.match(address):
            raise ValueError(f"not a host:port address: {address!r}")
    text = template if template is not None else TEMPLATE.read_text()
    servers = "\n".join(f"        server {address};" for address in workers)
    text = re.sub(r"(?m)^[ \t]*@UPSTREAM_SERVERS@[ \t]*$", lambda _: servers, text)
    text = text.replace("@LISTEN@", listen)
    left = re.findall(r"@[A-Z_]+@", text)
    if left:
        raise ValueError(f"placeholders left in the template: {sorted(set(left))}")
    return text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", required=True, help="host:port nginx listens on, e.g. 127.0.0.1:8080")
    parser.add_argument("--worker", action="append", required=True, metavar="HOST:PORT",
                        help="a daphne worker (repeat for each one)")
    args = parser.parse_args(argv)
    try:
        sys.stdout.write(render(args.listen, args.worker))
    except ValueError as exc:
        parser.error(str(exc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
