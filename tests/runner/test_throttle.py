"""A provider's rate limit: token buckets shared by every slot, per eval or per tag."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from firewall.cli import main
from firewall.config import parse_settings
from firewall.errors import ConfigError
from firewall.runner.throttle import Throttle
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


def test_a_bucket_lets_a_seconds_worth_start_then_spaces_the_rest() -> None:
    time = FakeTime()
    throttle = Throttle(clock=time.clock)
    waits = [throttle.wait("tag:openai", 2.0, time.sleep) for _ in range(5)]
    assert waits == [0.0, 0.0, 0.5, 0.5, 0.5]  # "120/min": two at once, then one per 0.5 s
    assert time.now == pytest.approx(1.5)


def test_evals_of_one_tag_share_a_bucket_and_others_do_not() -> None:
    time = FakeTime()
    throttle = Throttle(clock=time.clock)
    assert throttle.wait("tag:openai", 1.0, time.sleep) == 0.0
    assert throttle.wait("tag:openai", 1.0, time.sleep) == 1.0  # the other eval of the tag
    assert throttle.wait("eval:local", 1.0, time.sleep) == 0.0  # a bucket of its own
    assert throttle.wait(None, None, time.sleep) == 0.0  # no limit


def test_a_stopped_run_stops_waiting() -> None:
    time = FakeTime()
    throttle = Throttle(clock=time.clock)
    throttle.wait("b", 0.1, time.sleep)
    assert throttle.wait("b", 0.1, lambda seconds: True) == 0.0


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
