"""firewall.runner with real subprocesses: command and Python evals, bad outputs, crashes, timeouts.

No mocking and no timed assertions: timeouts are set to 1 s and only their
outcome (an error that says so) is checked, never how long anything took.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import pytest
from builders import command_spec, python_spec, write_module

from firewall.runner import Runner, Task
from firewall.runner.trial import TrialRecord
from firewall.spec import EvalSpec

SEED = 1234567
HUGE = 17 * 1024 * 1024  # more than the 16 MiB of stdout the runner keeps


def run(
    cwd: Path,
    spec: EvalSpec,
    *,
    trials: int = 1,
    k: int = 7,
    concurrency: int = 1,
    seed: int = SEED,
) -> list[TrialRecord]:
    tasks = [Task(spec, index, seed + index, k) for index in range(trials)]
    return Runner(concurrency=concurrency, cwd=cwd).run(tasks)


def run_one(cwd: Path, spec: EvalSpec, **options: int) -> TrialRecord:
    [record] = run(cwd, spec, **options)
    return record


def error_of(record: TrialRecord) -> str:
    assert record.error is not None, f"expected an error, got score {record.score}"
    assert record.score is None  # a crash is never a low score
    return record.error


# --- command evals: where the result comes from -----------------------------------


def test_command_result_from_the_firewall_result_file(project: Path) -> None:
    spec = command_spec("""printf '{"score": 0.25, "model_id": "m-1"}' > "$FIREWALL_RESULT" """)

    record = run_one(project, spec)

    assert record.error is None
    assert (record.score, record.model_id) == (0.25, "m-1")
    assert (record.index, record.seed) == (0, SEED)


def test_command_result_via_the_result_placeholder(project: Path) -> None:
    record = run_one(project, command_spec("""echo '{"score": 0.5}' > {result}"""))

    assert record.score == 0.5


def test_command_result_file_wins_over_stdout(project: Path) -> None:
    spec = command_spec("""echo '{"score": 0.3}' > "$FIREWALL_RESULT"; echo '{"score": 0.9}'""")

    assert run_one(project, spec).score == 0.3


def test_command_result_from_the_last_non_empty_stdout_line(project: Path) -> None:
    spec = command_spec(
        """echo 'loading model...'; echo '{"score": 0.1}'; echo '{"score": 0.7}'; echo; echo '  '"""
    )

    record = run_one(project, spec)

    assert record.error is None and record.score == 0.7


def test_command_trial_result_is_validated(project: Path) -> None:
    record = run_one(project, command_spec("""echo '{"score": NaN}'"""))

    assert "finite" in error_of(record)


def test_command_reported_error_is_an_error(project: Path) -> None:
    record = run_one(project, command_spec("""echo '{"error": "judge unavailable"}'"""))

    assert "judge unavailable" in error_of(record)


# --- command evals: placeholders and environment -------------------------------------


def test_placeholders_are_replaced(project: Path) -> None:
    spec = command_spec(
        """printf '%s\\n' {seed} {trial} {eval_id} > seen.txt; echo '{"score": 1}'""",
        id="suite/triage_1.v2",
    )

    records = run(project, spec, trials=1, seed=987654)

    assert records[0].error is None
    assert (project / "seen.txt").read_text().splitlines() == ["987654", "0", "suite/triage_1.v2"]


@pytest.mark.parametrize(
    "hostile_id",
    [
        "x; touch pwned",
        "$(touch pwned)",
        "`touch pwned`",
        "a' ; touch pwned; echo '",
        'a" ; touch pwned; echo "',
        "a\ntouch pwned",
        "a && touch pwned",
    ],
)
def test_an_eval_id_cannot_inject_shell(project: Path, hostile_id: str) -> None:
    spec = command_spec(
        """printf '%s' {eval_id} > seen.txt; printf '%s' "$FIREWALL_EVAL_ID" > env.txt; """
        """echo '{"score": 1}'""",
        id=hostile_id,
    )

    record = run_one(project, spec)

    assert record.error is None
    assert not (project / "pwned").exists()
    assert (project / "seen.txt").read_text() == hostile_id
    assert (project / "env.txt").read_text() == hostile_id


def test_the_result_placeholder_is_the_firewall_result_path(project: Path) -> None:
    spec = command_spec(
        """printf '%s\\n' {result} "$FIREWALL_RESULT" > seen.txt; echo '{"score": 1}'"""
    )

    run_one(project, spec)

    placeholder, variable = (project / "seen.txt").read_text().splitlines()
    assert placeholder == variable
    assert placeholder.endswith(".json")


def test_other_braces_are_left_alone(project: Path) -> None:
    spec = command_spec("""printf '%s' '{k} {seeds} {}' > seen.txt; echo '{"score": 1}'""")

    run_one(project, spec)

    assert (project / "seen.txt").read_text() == "{k} {seeds} {}"


def test_firewall_environment_variables(project: Path) -> None:
    spec = command_spec(
        'printf "%s\\n" "$FIREWALL_SEED" "$FIREWALL_TRIAL" "$FIREWALL_EVAL_ID" "$FIREWALL_K" '
        '"$FIREWALL_RESULT" > "env-$FIREWALL_TRIAL.txt"; echo \'{"score": 1}\'',
        id="refusals",
    )

    records = run(project, spec, trials=2, k=9, seed=555)

    assert [record.error for record in records] == [None, None]
    for index in (0, 1):
        seed, trial, eval_id, k, result = (project / f"env-{index}.txt").read_text().splitlines()
        assert (seed, trial, eval_id, k) == (str(555 + index), str(index), "refusals", "9")
        assert result.endswith(".json") and Path(result).is_absolute()


def test_commands_inherit_the_environment_and_keep_their_line_numbers(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUDGE_MODEL", "judge-7")
    monkeypatch.setenv("FIREWALL_SEED", "stale value from the caller")
    spec = command_spec(
        'printf "%s %s" "$JUDGE_MODEL" "$FIREWALL_SEED" > seen.txt; no-such-tool 2> error.txt\n'
        "echo '{\"score\": 1}'"
    )

    run(project, spec, trials=1, seed=42)

    assert (project / "seen.txt").read_text() == "judge-7 42"
    # The FIREWALL_* exports share the command's first line: an error there is on line 1
    # ("sh: 1: no-such-tool: not found" from dash, "sh: line 1: ..." from bash).
    error = (project / "error.txt").read_text()
    assert "no-such-tool" in error and (" 1: " in error or "line 1:" in error), error


def test_commands_run_in_the_working_directory(project: Path) -> None:
    (project / "data.txt").write_text("here")

    record = run_one(project, command_spec("""test -f data.txt && echo '{"score": 1}'"""))

    assert record.score == 1.0


# --- command evals: exit-code mode ------------------------------------------------------


@pytest.mark.parametrize(("status", "score", "passed"), [(0, 1.0, True), (1, 0.0, False)])
def test_exit_code_mode_scores_the_exit_status(
    project: Path, status: int, score: float, passed: bool
) -> None:
    record = run_one(project, command_spec(f"exit {status}", result="exit-code"))

    assert (record.error, record.score, record.passed) == (None, score, passed)


@pytest.mark.parametrize("status", [2, 5, 127])
def test_exit_code_mode_other_statuses_are_errors(project: Path, status: int) -> None:
    spec = command_spec(f"echo 'collection failed' >&2; exit {status}", result="exit-code")

    message = error_of(run_one(project, spec))

    assert f"exit status {status}" in message
    assert "collection failed" in message


def test_exit_code_mode_ignores_stdout(project: Path) -> None:
    spec = command_spec("""echo '{"score": 0.2}'; exit 0""", result="exit-code")

    assert run_one(project, spec).score == 1.0


def test_exit_code_mode_signal_is_an_error(project: Path) -> None:
    message = error_of(run_one(project, command_spec("kill -9 $$", result="exit-code")))

    assert "SIGKILL" in message


# --- command evals: bad outputs are errors carrying exit status and stderr -----------


def test_non_json_output_is_an_error_with_status_and_stderr(project: Path) -> None:
    spec = command_spec("echo 'accuracy: 0.9'; echo 'warning: judge slow' >&2; exit 3")

    message = error_of(run_one(project, spec))

    assert "exit status 3" in message
    assert "warning: judge slow" in message


def test_empty_output_is_an_error(project: Path) -> None:
    message = error_of(run_one(project, command_spec("echo 'nothing to say' >&2")))

    assert "no output" in message and "exit status 0" in message
    assert "nothing to say" in message


@pytest.mark.parametrize("last_line", ["[0.9]", '"0.9"', "null", "true", '{"score": 0.9'])
def test_a_last_line_neither_object_nor_number_is_an_error(project: Path, last_line: str) -> None:
    spec = command_spec(f"printf '%s\\n' {shlex.quote(last_line)}")

    message = error_of(run_one(project, spec))

    assert "neither a JSON object nor a number" in message and "exit status 0" in message


@pytest.mark.parametrize(
    ("last_line", "score"), [("0.9", 0.9), ("1", 1.0), ("0", 0.0), ("8e-1", 0.8)]
)
def test_a_bare_json_number_is_the_score(project: Path, last_line: str, score: float) -> None:
    record = run_one(project, command_spec(f"echo progress; echo {last_line}"))

    assert record.error is None and record.score == score


@pytest.mark.parametrize(
    ("last_line", "problem"), [("1.5", "less than or equal to 1"), ("NaN", "finite")]
)
def test_a_bare_number_out_of_range_is_an_invalid_score(
    project: Path, last_line: str, problem: str
) -> None:
    message = error_of(run_one(project, command_spec(f"echo {last_line}")))

    assert message.startswith("invalid trial result: score:") and problem in message


def test_an_unparsable_result_file_is_an_error(project: Path) -> None:
    spec = command_spec("""echo '{"score": ' > "$FIREWALL_RESULT"; echo '{"score": 1}'""")

    message = error_of(run_one(project, spec))

    assert "FIREWALL_RESULT" in message and "JSON" in message


def test_the_stderr_tail_is_one_line_and_keeps_the_end(project: Path) -> None:
    spec = command_spec(
        'i=0; while [ $i -lt 2000 ]; do echo "line $i" >&2; i=$((i+1)); done; exit 4'
    )

    message = error_of(run_one(project, spec))

    assert "\n" not in message
    assert "line 1999" in message and "line 0 " not in message
    assert "exit status 4" in message


def test_huge_output_without_a_result_is_an_error(project: Path) -> None:
    spec = command_spec(f"head -c {HUGE} /dev/zero | tr '\\0' x")

    message = error_of(run_one(project, spec))

    assert "exit status 0" in message
    assert len(message) < 10_000  # the error does not carry the output


def test_huge_output_before_the_result_line_keeps_the_result(project: Path) -> None:
    spec = command_spec(f"""head -c {HUGE} /dev/zero | tr '\\0' x; echo; echo '{{"score": 0.5}}'""")

    record = run_one(project, spec)

    assert record.error is None and record.score == 0.5


def test_huge_stderr_is_drained_and_tailed(project: Path) -> None:
    spec = command_spec(f"""head -c {HUGE} /dev/zero | tr '\\0' y >&2; echo '{{"score": 0.5}}'""")

    assert run_one(project, spec).score == 0.5


def test_a_command_killed_by_a_signal_is_an_error(project: Path) -> None:
    spec = command_spec("""echo '{"score": 1}'; echo 'out of memory' >&2; kill -9 $$""")

    message = error_of(run_one(project, spec))

    assert "SIGKILL" in message
    assert "out of memory" in message


def test_a_command_past_the_timeout_is_killed_and_an_error(project: Path) -> None:
    spec = command_spec("echo 'calling the judge' >&2; sleep 30", timeout=1)

    message = error_of(run_one(project, spec))

    assert "timed out" in message and "1 s" in message
    assert "calling the judge" in message


def test_a_command_that_closes_its_pipes_is_still_killed_at_the_timeout(project: Path) -> None:
    spec = command_spec("exec >/dev/null 2>&1; sleep 30", timeout=1)

    message = error_of(run_one(project, spec))

    assert "timed out" in message


def test_a_background_child_holding_stdout_does_not_hold_the_trial(project: Path) -> None:
    """The command printed its result and exited; a child it left behind keeps the pipe."""
    spec = command_spec("""sleep 30 & echo $! > orphan.pid; echo '{"score": 0.9}'""", timeout=20)

    (record,) = run(project, spec, trials=1)

    assert record.error is None and record.score == 0.9
    assert record.duration_s < 20, "it did not wait for the timeout"
    orphan = int((project / "orphan.pid").read_text())
    assert not _still_running(orphan), "the orphan was killed with its process group"


def _still_running(pid: int, patience_s: float = 10.0) -> bool:
    """Whether ``pid`` still runs after up to ``patience_s`` (a zombie has stopped running)."""
    deadline = time.monotonic() + patience_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return False
        if state in ("Z", "X"):
            return False
        time.sleep(0.02)
    return True


def test_a_python_eval_that_reads_stdin_gets_nothing_and_no_request(project: Path) -> None:
    write_module(
        project,
        "reader",
        "import sys\n\ndef trial(seed):\n"
        "    data = sys.stdin.read()\n    return {'score': 1.0, 'fields': {'stdin': data}}\n",
    )
    spec = python_spec("reader:trial", timeout=10)

    first, second = run(project, spec, trials=2)

    assert first.fields == {"stdin": ""} and second.fields == {"stdin": ""}


def test_a_failing_trial_does_not_affect_the_next(project: Path) -> None:
    spec = command_spec(
        """if [ "$FIREWALL_TRIAL" = 0 ]; then kill -9 $$; fi; echo '{"score": 0.9}'"""
    )

    first, second = run(project, spec, trials=2)

    assert first.error is not None
    assert second.error is None and second.score == 0.9


# --- Python evals -----------------------------------------------------------------------


def test_python_eval_returning_a_float(project: Path) -> None:
    write_module(
        project,
        "ev_float",
        """
        def accuracy(seed):
            return 0.5 + (seed % 2) / 4
    """,
    )

    records = run(project, python_spec("ev_float:accuracy"), trials=2, seed=10)

    assert [record.score for record in records] == [0.5, 0.75]
    assert [record.seed for record in records] == [10, 11]


def test_python_eval_gets_trial_only_when_it_accepts_it(project: Path) -> None:
    write_module(
        project,
        "ev_kwargs",
        """
        def with_trial(seed, trial):
            return {"score": 1, "fields": {"seed": seed, "trial": trial}}

        def seed_only(seed):
            return {"score": 1, "fields": {"seed": seed}}

        def keyword_only(*, seed):
            return 1.0

        def var_keywords(seed, **extra):
            return {"score": 1, "fields": extra}
    """,
    )

    with_trial = run(project, python_spec("ev_kwargs:with_trial"), trials=2, seed=40)
    seed_only = run_one(project, python_spec("ev_kwargs:seed_only"), seed=40)
    keyword_only = run_one(project, python_spec("ev_kwargs:keyword_only"))
    var_keywords = run(project, python_spec("ev_kwargs:var_keywords"), trials=2)

    assert [r.fields for r in with_trial] == [{"seed": 40, "trial": 0}, {"seed": 41, "trial": 1}]
    assert seed_only.error is None and seed_only.fields == {"seed": 40}
    assert keyword_only.error is None
    assert [r.fields for r in var_keywords] == [{"trial": 0}, {"trial": 1}]


def test_async_python_eval_is_awaited(project: Path) -> None:
    write_module(
        project,
        "ev_async",
        """
        import asyncio

        async def judge(seed, trial):
            await asyncio.sleep(0.01)
            return 0.25 * (trial + 1)
    """,
    )

    records = run(project, python_spec("ev_async:judge"), trials=3)

    assert [record.score for record in records] == [0.25, 0.5, 0.75]


@pytest.mark.parametrize(
    ("expression", "score", "passed"),
    [
        ("True", 1.0, True),
        ("False", 0.0, False),
        ("1", 1.0, True),
        ("0.75", 0.75, False),
        ('{"score": 0.9, "items": {"case-1": 1.0}}', 0.9, True),
        ('{"passed": True}', 1.0, True),
        ("firewall.TrialResult(score=0.85, model_id='m-2')", 0.85, True),
        ("firewall.TrialResult(score=0.3, passed=True)", 0.3, True),
    ],
)
def test_python_eval_return_values(
    project: Path, expression: str, score: float, passed: bool
) -> None:
    write_module(
        project,
        "ev_returns",
        f"""
        import firewall

        def value(seed):
            return {expression}
    """,
    )

    record = run_one(project, python_spec("ev_returns:value"))

    assert (record.error, record.score, record.passed) == (None, score, passed)


def test_python_eval_trial_result_carries_violations_and_metrics(project: Path) -> None:
    write_module(
        project,
        "ev_result",
        """
        import firewall

        def check(seed):
            return firewall.TrialResult(score=1.0, violations=["pii-in-reply"],
                                        metrics={"latency_ms": 12.5}, fields={"action": "refund"})
    """,
    )

    record = run_one(project, python_spec("ev_result:check"))

    assert record.violations == ["pii-in-reply"]
    assert record.metrics == {"latency_ms": 12.5}
    assert record.fields == {"action": "refund"}


@pytest.mark.parametrize(
    ("expression", "score"),
    [("numpy.bool_(True)", 1.0), ("numpy.float32(0.5)", 0.5), ("numpy.int64(0)", 0.0)],
)
def test_python_eval_numpy_scalars_are_numbers(
    project: Path, expression: str, score: float
) -> None:
    write_module(
        project,
        "ev_numpy",
        f"""
        import numpy

        def value(seed):
            return {expression}
    """,
    )

    record = run_one(project, python_spec("ev_numpy:value"))

    assert (record.error, record.score) == (None, score)


@pytest.mark.parametrize(
    ("expression", "named"),
    [
        ('float("nan")', "finite"),
        ('float("inf")', "finite"),
        ("1.5", "score"),
        ('"0.9"', "str"),
        ("None", "NoneType"),
        ("[0.9]", "list"),
        ('{"score": 0.9, "latency": 3}', "latency"),
        ('{"error": "judge unavailable"}', "judge unavailable"),
    ],
)
def test_python_eval_bad_return_values_are_errors(
    project: Path, expression: str, named: str
) -> None:
    write_module(
        project,
        "ev_bad",
        f"""
        def value(seed):
            return {expression}
    """,
    )

    message = error_of(run_one(project, python_spec("ev_bad:value")))

    assert named in message


def test_python_eval_exception_is_an_error_with_type_and_message(project: Path) -> None:
    write_module(
        project,
        "ev_raises",
        """
        def judge(seed):
            raise ValueError(f"judge said no to seed {seed}")
    """,
    )

    message = error_of(run_one(project, python_spec("ev_raises:judge"), seed=77))

    assert "ValueError" in message
    assert "judge said no to seed 77" in message


def test_python_eval_sys_exit_is_an_error(project: Path) -> None:
    write_module(
        project,
        "ev_exit",
        """
        import sys

        def judge(seed):
            sys.exit(4)
    """,
    )

    message = error_of(run_one(project, python_spec("ev_exit:judge")))

    assert "exit" in message and "4" in message


def test_python_eval_missing_module_is_an_error(project: Path) -> None:
    message = error_of(run_one(project, python_spec("no_such_module:fn")))

    assert "ModuleNotFoundError" in message and "no_such_module" in message


def test_python_eval_missing_function_is_an_error(project: Path) -> None:
    write_module(project, "ev_empty", "X = 1\n")

    message = error_of(run_one(project, python_spec("ev_empty:missing")))

    assert "missing" in message


def test_python_evals_import_from_the_working_directory(project: Path) -> None:
    (project / "evals").mkdir()
    write_module(
        project / "evals",
        "safety",
        """
        def refusal_rate(seed):
            return True
    """,
    )

    assert run_one(project, python_spec("evals.safety:refusal_rate")).score == 1.0


def test_python_eval_crash_costs_one_trial(project: Path) -> None:
    write_module(
        project,
        "ev_crash",
        """
        import os
        import sys

        def flaky(seed, trial):
            if trial == 0:
                print("segfault incoming", file=sys.stderr, flush=True)
                os._exit(3)
            return 0.9
    """,
    )

    first, second, third = run(project, python_spec("ev_crash:flaky"), trials=3)

    message = error_of(first)
    assert "status 3" in message and "segfault incoming" in message
    assert (second.error, second.score) == (None, 0.9)
    assert (third.error, third.score) == (None, 0.9)


def test_python_eval_killed_by_a_signal_costs_one_trial(project: Path) -> None:
    write_module(
        project,
        "ev_signal",
        """
        import os
        import signal

        def flaky(seed, trial):
            if trial == 0:
                os.kill(os.getpid(), signal.SIGKILL)
            return 0.9
    """,
    )

    first, second = run(project, python_spec("ev_signal:flaky"), trials=2)

    assert "SIGKILL" in error_of(first)
    assert second.score == 0.9


def test_python_eval_result_over_16_mib_costs_one_trial(project: Path) -> None:
    write_module(
        project,
        "ev_huge",
        """
        def big(seed, trial):
            blob = "x" * (17 * 1024 * 1024) if trial == 0 else "small"
            return {"score": 1.0, "fields": {"blob": blob}}
    """,
    )

    first, second = run(project, python_spec("ev_huge:big"), trials=2)

    assert "16 MiB" in error_of(first)
    assert second.error is None and second.fields == {"blob": "small"}


def test_python_eval_hang_is_killed_at_the_timeout(project: Path) -> None:
    write_module(
        project,
        "ev_hang",
        """
        import time

        def slow(seed, trial):
            if trial == 0:
                time.sleep(60)
            return 0.9
    """,
    )

    # the same target twice on one slot; only the hanging trial has the short timeout, so a
    # slow machine restarting the worker cannot make the second trial time out too
    tasks = [
        Task(python_spec("ev_hang:slow", timeout=1), 0, SEED, 2),
        Task(python_spec("ev_hang:slow", timeout=60), 1, SEED + 1, 2),
    ]
    first, second = Runner(concurrency=1, cwd=project).run(tasks)

    message = error_of(first)
    assert "timed out" in message and "1 s" in message
    assert (second.error, second.score) == (None, 0.9)


def test_print_inside_a_python_eval_does_not_corrupt_the_protocol(project: Path) -> None:
    write_module(
        project,
        "ev_print",
        """
        import os
        import sys

        print('{"result": {"score": 0.0}}')  # at import time too

        def chatty(seed):
            print('{"result": {"score": 0.0}}')
            print('{"error": "forged"}', flush=True)
            sys.stdout.write("no newline at the end")
            sys.__stdout__.write('{"result": {"score": 0.1}}\\n')
            sys.__stdout__.flush()
            os.write(1, b'{"result": {"score": 0.2}}\\n')
            print("x" * 100_000)
            return 0.9
    """,
    )

    records = run(project, python_spec("ev_print:chatty"), trials=3)

    assert [(record.error, record.score) for record in records] == [(None, 0.9)] * 3


# --- concurrency -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["command", "python"])
def test_concurrency_bounds_and_reaches_the_trials_in_flight(project: Path, kind: str) -> None:
    if kind == "command":
        spec = command_spec("""sleep 0.5; echo '{"score": 1}'""")
    else:
        write_module(
            project,
            "ev_sleep",
            """
            import time

            def slow(seed):
                time.sleep(0.5)
                return 1.0
        """,
        )
        spec = python_spec("ev_sleep:slow")

    records = run(project, spec, trials=8, concurrency=4)

    assert [record.index for record in records] == list(range(8))  # task order
    assert all(record.error is None for record in records)
    assert max(record.in_flight for record in records) == 4
    assert all(1 <= record.in_flight <= 4 for record in records)


def test_no_tasks_no_records(project: Path) -> None:
    assert Runner(concurrency=4, cwd=project).run([]) == []


def test_mixed_tasks_come_back_in_task_order(project: Path) -> None:
    write_module(
        project,
        "ev_mixed",
        """
        def value(seed, trial):
            return trial / 10
    """,
    )
    python = python_spec("ev_mixed:value", id="py")
    command = command_spec("""echo "{\\"score\\": 0.$FIREWALL_TRIAL}" """, id="cmd")
    tasks = [Task(spec, index, 100 + index, 3) for index in range(3) for spec in (python, command)]

    records = Runner(concurrency=3, cwd=project).run(tasks)

    assert [(record.index, record.seed, record.score) for record in records] == [
        (0, 100, 0.0),
        (0, 100, 0.0),
        (1, 101, 0.1),
        (1, 101, 0.1),
        (2, 102, 0.2),
        (2, 102, 0.2),
    ]


def test_a_crash_message_after_earlier_trials_is_clean(project: Path) -> None:
    write_module(
        project,
        "noisy",
        "import os, sys\n\ndef trial(seed, trial):\n"
        "    print('x' * 5000, file=sys.stderr)\n"
        "    if trial == 2:\n        os._exit(7)\n    return 1.0\n",
    )
    records = run(project, python_spec("noisy:trial", timeout=10), trials=3)

    crash = records[2].error or ""
    assert "exited with status 7" in crash and "\x00" not in crash
