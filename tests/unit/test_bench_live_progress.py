"""bench.live's progress line after a round: numbers a person reads, not float sums."""

from __future__ import annotations

from bench.live import round_line


def test_cpu_seconds_and_first_bind_are_formatted() -> None:
    result = {"outcome": "all bound", "bound": 100, "pods": 100, "pods_per_second": 87.34, "first_bind_seconds": 0.5,
              "nodes_used": 13, "scheduler_cpu_seconds": 0.8700000000000001,
              "apiserver_cpu_seconds": 0.31999999999999995, "etcd_cpu_seconds": None}
    assert round_line(result) == ("  -> all bound: 100/100 bound, 87.3 pods/s, first bind after 0.50 s, 13 nodes used, "
                                  "CPU s sched/apiserver/etcd 0.87/0.32/–")
