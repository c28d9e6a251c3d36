"""`streamcrawl up`'s supervisor: restarts within a budget per window, the local broker
included, and says when it leaves a process stopped. Fakes stand for the processes; the clock is
the test's."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from streamcrawl.up_cli import RestartBudget, supervise


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class FakeProcess:
    code: int | None = None

    def poll(self) -> int | None:
        return self.code


@dataclass
class FakeInstance:
    instance_id: str
    process: FakeProcess
    log_path: Path


@dataclass
class FakeStack:
    processes: dict[str, FakeProcess] = field(default_factory=dict)
    restarted: list[str] = field(default_factory=list)

    def failed(self) -> list[FakeInstance]:
        return [
            FakeInstance(name, process, Path(f"logs/{name}.log"))
            for name, process in self.processes.items()
            if process.code not in (None, 0)
        ]

    def restart(self, name: str) -> None:
        self.restarted.append(name)
        self.processes[name] = FakeProcess()


@dataclass
class FakeBroker:
    code: int | None = None
    starts: int = 0
    logs_dir: Path = Path("kafka/logs")
    bootstrap: str = "127.0.0.1:9092"

    def exited(self) -> int | None:
        return self.code

    def start(self) -> str:
        self.starts += 1
        self.code = None
        return self.bootstrap


class Steps(threading.Event):
    """The supervisor's wait: each call is one step `step_s` later, running `each` first; set
    after `steps` calls."""

    def __init__(self, clock: Clock, steps: int, step_s: float, each: Callable[[int], None]):
        super().__init__()
        self.clock, self.steps, self.step_s, self.each = clock, steps, step_s, each
        self.calls = 0

    def wait(self, timeout: float | None = None) -> bool:
        self.calls += 1
        self.clock.now += self.step_s
        if self.calls > self.steps:
            return True
        self.each(self.calls)
        return False


def run(stack: FakeStack, steps: Steps, clock: Clock, broker: Any = None) -> None:
    budget = RestartBudget(limit=3, window_s=600.0, clock=clock)
    supervise(stack, steps, broker, budget)  # type: ignore[arg-type]


def test_a_crash_loop_is_restarted_three_times_then_left_stopped_and_said_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    clock = Clock()
    stack = FakeStack({"parser-0": FakeProcess(), "fetcher-0": FakeProcess()})

    def crash(step: int) -> None:
        stack.processes["parser-0"].code = 1

    run(stack, Steps(clock, 10, 1.0, crash), clock)
    assert stack.restarted == ["parser-0"] * 3
    out = capsys.readouterr().out
    assert "parser-0 exited with 1 (log logs/parser-0.log); restarting (3/3 in 10 min)" in out
    assert out.count("parser-0 exited 4 times in 10 min; left stopped, see logs/parser-0.log") == 1


def test_crashes_further_apart_than_the_window_allows_are_restarted_every_time() -> None:
    clock = Clock()
    stack = FakeStack({"storage-0": FakeProcess()})

    def crash_now_and_then(step: int) -> None:
        if step % 5 == 0:
            stack.processes["storage-0"].code = 1

    run(stack, Steps(clock, 100, 60.0, crash_now_and_then), clock)  # one crash each 5 min
    assert stack.restarted == ["storage-0"] * 20


def test_the_local_broker_is_started_again_when_it_exits(
    capsys: pytest.CaptureFixture[str],
) -> None:
    clock = Clock()
    broker = FakeBroker()

    def kill_once(step: int) -> None:
        if step == 2:
            broker.code = 137

    run(FakeStack(), Steps(clock, 5, 1.0, kill_once), clock, broker)
    assert broker.starts == 1
    out = capsys.readouterr().out
    assert "the local broker exited with 137 (logs kafka/logs); starting it again (1/3" in out
    assert "the local broker is back on 127.0.0.1:9092" in out


def test_a_broker_that_keeps_exiting_ends_the_supervision(
    capsys: pytest.CaptureFixture[str],
) -> None:
    clock = Clock()
    broker = FakeBroker()

    def kill(step: int) -> None:
        broker.code = 1

    steps = Steps(clock, 50, 1.0, kill)
    run(FakeStack(), steps, clock, broker)
    assert broker.starts == 3
    assert steps.calls == 4  # returned at the fourth exit, not at the end of the steps
    assert "the local broker keeps exiting; stopping (logs kafka/logs)" in capsys.readouterr().out
