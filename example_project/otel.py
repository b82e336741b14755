"""The OpenTelemetry SDK for the example, chosen by MCP_EXAMPLE_OTEL (a project configures its own):

- unset: no SDK; opentelemetry-api's spans go nowhere.
- `record`: a tracer provider that records every span and exports none (what tracing costs
  before any exporter).
- `file:<path>`: the same, and a batch span processor exporting each span as JSON to <path>.
"""
import os


def configure():
    choice = os.environ.get("MCP_EXAMPLE_OTEL", "")
    if not choice:
        return
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    if choice.startswith("file:"):
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

        out = open(choice[len("file:"):], "a", encoding="utf-8")  # noqa: SIM115  (open while the process lives)
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter(out=out)))
    elif choice != "record":
        raise ValueError(f"MCP_EXAMPLE_OTEL: 'record' or 'file:<path>', not {choice!r}")
    trace.set_tracer_provider(provider)
