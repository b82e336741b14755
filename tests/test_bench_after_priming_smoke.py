"""bench/after_priming.py in small numbers against real daphnes: what it counts is right (one POST
under `never`; a reconnect per `retry` under `after_priming` once a call outlasts the grace, none
within it). No timing is asserted."""
from bench import after_priming


def test_after_priming_bench_counts_the_round_trips_a_call_costs():
    durations = [0.0, 0.4]
    never = after_priming.measure({"DISCONNECT_POLICY": "never"}, durations, repeats=1)
    polled = after_priming.measure({"DISCONNECT_POLICY": "after_priming", "RETRY_MS": 100}, durations, repeats=1)
    assert {seconds: requests for seconds, (requests, _) in never.items()} == {0.0: [1], 0.4: [1]}
    assert polled[0.0][0] == [1]  # answered within AFTER_PRIMING_GRACE_SECONDS: no reconnect
    assert polled[0.4][0][0] >= 2
    assert all(latency >= 0.4 for latency in polled[0.4][1] + never[0.4][1])
    lines = after_priming.table({"never": never, "after_priming, retry 100 ms": polled})
    assert len(lines) == 2 + 4 and lines[-1].startswith("| after_priming, retry 100 ms | 400 ms | ")
