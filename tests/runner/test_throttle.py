"""A provider's rate limit: token buckets shared by every slot, per eval or per tag."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import python_spec, write_module
from click.testing import CliRunner

from firewall.cli import main
from firewall.config import parse_settings
from firewall.errors import ConfigError
from firewall.runner import Runner, Task
from firewall.runner.throttle import Throttle, meter
from firewall.spec import EvalSpec, Source


class FakeTime:
    """A clock that moves only when someone sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> bool:
        self.slept.append(seconds)
        self.now += seconds
        return False


def test_a_bucket_lets_rate_start_in_a_second_from_the_first_second_on(tmp_path: Path) -> None:
    time = FakeTime()
    throttle = Throttle(tmp_path, clock=time.clock)
    waits = [throttle.wait("tag:openai", 2.0, time.sleep) for _ in range(5)]
    # "120/min": two in the first second (no full bucket and then a second's worth more),
    # two in the next, and so on
    assert waits == [0.0, 0.0, pytest.approx(1.05), 0.0, pytest.approx(1.05)]
    assert time.now == pytest.approx(2.1)


def test_evals_of_one_tag_share_a_bucket_and_others_do_not(tmp_path: Path) -> None:
    time = FakeTime()
    throttle = Throttle(tmp_path, clock=time.clock)
    assert throttle.wait("tag:openai", 1.0, time.sleep) == 0.0
    assert throttle.wait("tag:openai", 1.0, time.sleep) == pytest.approx(1.05)  # its tag's
    assert throttle.wait("eval:local", 1.0, time.sleep) == 0.0  # a bucket of its own
    assert throttle.wait(None, None, time.sleep) == 0.0  # no limit


def test_a_stopped_run_stops_waiting(tmp_path: Path) -> None:
    time = FakeTime()
    throttle = Throttle(tmp_path, clock=time.clock)
    throttle.wait("b", 0.1, time.sleep)
    assert throttle.wait("b", 0.1, lambda seconds: True) == 0.0


@pytest.mark.parametrize(
    ("rate", "expected"),
    [(20.0, (20, 1.0)), (2.5, (2, 1.0)), (0.5, (1, 2.0)), (1 / 60, (1, 60.0))],
)
def test_a_rate_is_so_many_starts_in_a_sliding_window(
    rate: float, expected: tuple[int, float]
) -> None:
    starts, window = meter(rate)
    assert (starts, window) == pytest.approx(expected)


START_LOG = """
import asyncio, os, time

def _log(seed, trial):
    # as a real eval would: its own clock, its own file, at the moment it starts
    with open(os.environ["START_LOG"], "a") as f:
        f.write(f"{time.monotonic()!r}\\n")
    return 1.0

def sync_call(seed, trial):
    _log(seed, trial)
    time.sleep(0.05)
    return 1.0

async def async_call(seed, trial):
    _log(seed, trial)
    await asyncio.sleep(0.05)
    return 1.0
"""


def most_in_one_second(starts: list[float]) -> int:
    """The most starts in any sliding one-second window [t, t + 1)."""
    starts = sorted(starts)
    most, first = 0, 0
    for last, at in enumerate(starts):
        while at - starts[first] >= 1.0:
            first += 1
        most = max(most, last - first + 1)
    return most


@pytest.mark.parametrize("kind", ["async", "sync"])
def test_no_one_second_window_has_more_starts_than_the_rate_at_64_in_flight(
    project: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The eval logs its own start time; with 64 trials in flight (async: in pool workers;
    sync: 64 workers booting at once) no window of one second holds more than 20."""
    write_module(project, "ev_rate", START_LOG)
    log = project / "starts.log"
    monkeypatch.setenv("START_LOG", str(log))
    spec = python_spec(
        f"ev_rate:{kind}_call",
        asynchronous=kind == "async",
        rate=20.0,
        rate_bucket="tag:api",
    )
    trials = 70
    tasks = [Task(spec, index, 1000 + index, trials) for index in range(trials)]
    records = Runner(concurrency=64, cwd=project).run(tasks)
    assert [r.error for r in records] == [None] * trials
    starts = [float(line) for line in log.read_text().split()]
    assert len(starts) == trials
    assert most_in_one_second(starts) == 20
    assert max(r.in_flight for r in records) > 20  # the limit held, not a lack of trials


def resolve(table: dict[str, object]) -> list[EvalSpec]:
    settings = parse_settings(table, source="firewall.toml", prefix="")
    return [EvalSpec.resolve(e, settings, Source(file="firewall.toml")) for e in settings.evals]


def test_an_evals_rate_and_a_tags_limit_become_buckets() -> None:
    own, first, second, free = resolve(
        {
            "limits": [{"tag": "openai", "rate": "120/min"}],
            "evals": [
                {"id": "own", "command": "true", "rate": "2/s", "tags": ["openai"]},
                {"id": "a", "command": "true", "tags": ["openai"]},
                {"id": "b", "command": "true", "tags": ["openai", "slow"]},
                {"id": "c", "command": "true"},
            ],
        }
    )
    assert (own.rate, own.rate_bucket) == (2.0, "eval:own")
    assert (first.rate, first.rate_bucket) == (2.0, "tag:openai")
    assert second.rate_bucket == "tag:openai"
    assert (free.rate, free.rate_bucket) == (None, None)


def test_a_rate_that_is_not_one_says_what_is() -> None:
    with pytest.raises(ConfigError, match=r"rate.*expected trials per second, minute or hour"):
        resolve({"evals": [{"id": "x", "command": "true", "rate": "fast"}]})


def test_a_rate_limited_run_runs_every_trial(project: Path) -> None:
    (project / "firewall.toml").write_text(
        'k = 3\nconcurrency = 4\n[[limits]]\ntag = "api"\nrate = "50/s"\n'
        '[[evals]]\nid = "a"\ncommand = "echo 0.9"\ntags = ["api"]\n'
        '[[evals]]\nid = "b"\ncommand = "echo 0.9"\ntags = ["api"]\n'
    )
    result = CliRunner().invoke(main, ["run"])
    assert result.exit_code == 0, result.output
    assert "2 passed" in result.output
