"""Keep every test off the machine: no GITHUB_* from the outside, paths in tmp_path."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from firewall.store.atomic import LOCK_DIR_VARIABLE


@pytest.fixture(autouse=True)
def clean_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """No GITHUB_* or FIREWALL_* from the outside; every lock file in pytest's own temp tree.

    Lock files would otherwise go to the system temp directory, one per file a
    test locked; the variable reaches the installed command's processes too.
    They get a directory of their own beside the test's tmp_path, so that tests
    that list what a command wrote do not see them.
    """
    for name in list(os.environ):
        if name.startswith(("GITHUB_", "FIREWALL_", "RUNNER_")) or name in ("CI",):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(LOCK_DIR_VARIABLE, str(tmp_path_factory.mktemp("locks")))


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty project directory that is also the working directory."""
    monkeypatch.chdir(tmp_path)
    yield tmp_path


# The slowest tests, marked `slow` so that `python -m pytest -m "not slow"` leaves them
# out while you work; `python -m pytest` (the README's and CI's command) runs them all.
# Each takes seconds, not milliseconds: it runs `firewall` end to end many times over
# (nights of a nightly, a CI lifecycle against a git origin), a pytest or JUnit suite
# once per trial, async trials that block their worker on purpose, or Hypothesis over
# every input. Measured with `--durations=30` on 2 shared CPUs: each entry took 4 s or
# more; `tests/test_fuzz.py` and `tests/pipeline/test_ci_lifecycle.py` 100 s and more
# between them. An entry is a module (every test in it) or a test's node id (every
# parameter of it).
SLOW = (
    "tests/test_fuzz.py",
    "tests/pipeline/test_ci_lifecycle.py",
    "tests/pipeline/test_affected_jobs.py",
    "tests/pipeline/test_affected_shards.py",
    "tests/test_types.py",  # mypy over every module: 90 s with no cache, 5 s with one
    "tests/pipeline/test_nightly.py::test_released_after_exactly_release_after_stable_nights",
    "tests/pipeline/test_nightly.py::test_release_below_threshold_warns_it_will_fail",
    "tests/pipeline/test_nightly.py::test_nightly_records_a_fresh_base_seed_each_night",
    "tests/pipeline/test_nightly.py::test_manual_quarantine_round_trip",
    "tests/pipeline/test_suites.py::test_the_nightly_re_probes_a_quarantined_case_through_its_suite",
    "tests/pipeline/test_suites.py::test_a_quarantined_case_still_runs_and_never_blocks",
    "tests/pipeline/test_suites.py::test_the_reproduce_line_of_a_pytest_case_reruns_that_case_alone",
    "tests/pipeline/test_broken_not_flaky.py::test_the_nightly_shows_a_broken_case_as_fail_and_exits_0",
    "tests/pipeline/test_ci_jobs.py::test_history_travels_between_jobs_through_the_origin",
    "tests/test_plain_tests.py::test_a_real_pytest_run_reads_the_same_as_a_junit_case_and_an_exit_code_command",
    "tests/cli/test_installed.py::test_shipped_example_suite_runs_and_exits_zero",
    "tests/cli/test_schema.py::test_the_schema_and_the_firewall_agree_on_any_payload",
    "tests/cli/test_hostile_files.py::test_a_history_of_one_endless_line_is_read_within_bounded_memory",
    "tests/runner/test_async_pool.py::test_a_blocking_trial_deaf_to_the_watchdog_still_costs_only_its_own_trial",
    "tests/runner/test_async_pool.py::test_trials_paused_by_a_blocking_neighbour_do_not_time_out",
    "tests/runner/test_async_pool.py::test_a_trial_that_holds_the_interpreter_itself_costs_only_its_own_trial",
)


def is_slow(nodeid: str) -> bool:
    return any(nodeid == slow or nodeid.startswith((f"{slow}::", f"{slow}[")) for slow in SLOW)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if is_slow(item.nodeid):
            item.add_marker(pytest.mark.slow)
