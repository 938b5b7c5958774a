"""An errored trial keeps its evidence: the eval's own traceback and what it printed; an
eval module's import is timed apart from its trials and has a limit of its own."""

from __future__ import annotations

from pathlib import Path

from builders import command_spec, python_spec, write_module

from firewall.runner import Runner, Task
from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec

RAISES = """\
import json


def lookup(table):
    return table["b"]


def score(seed):
    print("scoring with", json.dumps({"seed": seed}))
    return lookup({"a": 1})
"""

SLOW_IMPORT = """\
import time

time.sleep(1.5)  # a heavy SDK


def score(seed):
    return 0.9
"""


def run(cwd: Path, spec: EvalSpec, trials: int = 1) -> list[TrialRecord]:
    tasks = [Task(spec, index, 1000 + index, spec.k) for index in range(trials)]
    return Runner(concurrency=1, cwd=cwd).run(tasks)


def test_an_exception_keeps_the_evals_own_frames_and_what_it_printed(project: Path) -> None:
    target = write_module(project, "raises", RAISES) + ":score"
    (record,) = run(project, python_spec(target))
    assert record.error == "KeyError: 'b' (at raises.py:5)"
    assert record.traceback is not None
    frames = record.traceback.splitlines()
    assert frames[0] == "Traceback (most recent call last):"
    assert sum("raises.py" in line for line in frames) == 2  # score, then lookup
    assert not any("_worker.py" in line or "<frozen" in line for line in frames)
    assert frames[-1] == "KeyError: 'b'"
    assert record.output == 'scoring with {"seed": 1000}'


def test_an_import_failure_points_at_the_evals_line_not_into_importlib(project: Path) -> None:
    target = write_module(project, "broken", "import json\nimport nosuchmodule\n") + ":score"
    (record,) = run(project, python_spec(target))
    assert record.error is not None and "ModuleNotFoundError" in record.error
    assert "(at broken.py:2)" in record.error
    assert record.traceback is not None and "<frozen" not in record.traceback


def test_a_slow_import_is_not_charged_to_the_trials_timeout(project: Path) -> None:
    target = write_module(project, "heavy", SLOW_IMPORT) + ":score"
    first, second = run(project, python_spec(target, timeout=1.0), trials=2)
    assert first.error is None and second.error is None, (first.error, second.error)
    assert first.import_s is not None and first.import_s >= 1.4
    assert second.import_s is None  # the worker imported it once
    assert first.duration_s < first.import_s  # the trial's own time, without the import


def test_an_import_past_its_own_limit_says_so(project: Path) -> None:
    target = write_module(project, "heavier", SLOW_IMPORT) + ":score"
    (record,) = run(project, python_spec(target, timeout=5.0, import_timeout=0.5))
    assert record.error == (
        "importing heavier took longer than import_timeout 0.5 s; the worker was killed"
    )


def test_a_failing_command_keeps_the_tail_of_its_stdout_and_stderr(project: Path) -> None:
    command = "echo working on it; echo 'Traceback: boom' >&2; exit 3"
    (record,) = run(project, command_spec(command))
    assert record.error is not None and "exit status 3" in record.error
    assert record.output == "--- stdout ---\nworking on it\n--- stderr ---\nTraceback: boom"


def test_a_last_line_that_is_not_a_result_is_quoted(project: Path) -> None:
    (record,) = run(project, command_spec("echo 'score: 0.9'"))
    assert record.error is not None
    assert "its last stdout line ('score: 0.9') is neither a JSON object nor a number" in (
        record.error
    )


def test_a_bare_number_on_the_last_line_is_the_score(project: Path) -> None:
    (record,) = run(project, command_spec("echo 0.9"))
    assert record.error is None and record.score == 0.9


def test_run_verbose_and_replay_show_the_traceback_and_what_the_eval_printed(
    project: Path,
) -> None:
    from click.testing import CliRunner

    from firewall.cli import main

    write_module(project, "raises", RAISES)
    (project / "firewall.toml").write_text(
        'k = 3\n[[evals]]\nid = "lookup"\npython = "raises:score"\n'
        '[[evals]]\nid = "plain"\ncommand = "echo checking; exit 1"\nresult = "exit-code"\n'
    )
    shown = CliRunner().invoke(main, ["run", "-v"]).output
    assert "trial 0 (seed " in shown and ") traceback:" in shown
    assert '    return table["b"]' in shown  # the eval's own line, indented under the row
    assert 'scoring with {"seed": ' in shown
    replayed = CliRunner().invoke(main, ["replay", "lookup", "--seed", "5"])
    assert replayed.exit_code == 3
    assert replayed.output.startswith("Traceback (most recent call last):")
    assert '# what the trial printed:\nscoring with {"seed": 5}' in replayed.output
    plain = CliRunner().invoke(main, ["replay", "plain", "--seed", "5", "-v"])
    assert plain.exit_code == 0
    assert "# what the trial printed:\nchecking" in plain.output
    assert "# took " in plain.output


def test_a_python_trials_duration_is_its_call_alone_and_the_boot_is_kept_apart(
    project: Path,
) -> None:
    target = write_module(project, "quick", "def score(seed):\n    return 0.9\n") + ":score"
    first, second = run(project, python_spec(target), trials=2)
    assert first.boot_s is not None and second.boot_s is None  # one worker, booted once
    assert first.import_s is not None and second.import_s is None
    # An interpreter's start takes milliseconds, a call that returns a constant microseconds.
    assert first.duration_s < first.boot_s
