"""The regression stage: a pull request's probe against the default branch's history."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from firewall.pipeline import context
from firewall.pipeline.run import RunOptions, run
from firewall.store.history import HistoryRow, LocalHistory
from firewall.timeutil import to_text

NOW = dt.datetime.now(dt.timezone.utc)  # the runs of the default branch, days before this one
CONFIG = """
k = 7
seed = 7
[[evals]]
id = "triage"
command = "python score.py {trial}"
regression = { max_drop = 0.01 }
[[evals]]
id = "other"
command = "python score.py {trial}"
"""


def write_project(root: Path, level: float) -> None:
    (root / "firewall.toml").write_text(CONFIG)
    (root / "score.py").write_text(
        f"import sys\nprint({level} + (int(sys.argv[1]) % 3 - 1) * 0.005)\n"
    )


def main_history(
    root: Path, means: list[float], *, sd: float = 0.005, status: str = "pass"
) -> None:
    """The default branch's earlier runs, as its CI jobs left them."""
    LocalHistory(root / ".firewall" / "history.jsonl").append(
        [
            HistoryRow(
                eval_id=eval_id,
                run_id=f"main-{n}",
                mode="run",
                status=status,
                k=7,
                build_ts=to_text(NOW - dt.timedelta(days=len(means) - n)),
                median=mean,
                mean=mean,
                sd=sd,
                n=7,
                git_ref="refs/heads/main",
            )
            for n, mean in enumerate(means)
            for eval_id in ("triage", "other")
        ]
    )


def pull_request_env(root: Path) -> dict[str, str]:
    event = root / "event.json"
    event.write_text(
        json.dumps({"repository": {"default_branch": "main"}, "pull_request": {"number": 3}})
    )
    return {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_REF": "refs/pull/3/merge",
        "GITHUB_HEAD_REF": "feature",
        "GITHUB_EVENT_PATH": str(event),
    }


def decide(root: Path, env: dict[str, str]) -> dict[str, dict[str, Any]]:
    result = run(context.load(cwd=root, env=env), RunOptions(dry_run=True))
    return {r.id: r.model_dump(mode="json") for r in result.artefact.evals}


def test_a_drop_beyond_max_drop_on_a_pull_request_fails(project: Path) -> None:
    write_project(project, 0.80)  # the default branch ran at about 0.90
    main_history(project, [0.90, 0.91, 0.89, 0.90, 0.905, 0.895])
    reports = decide(project, pull_request_env(project))
    triage = reports["triage"]
    assert triage["status"] == "fail" and str(triage["reason"]).startswith("regression: drop 0.1")
    check = next(c for c in triage["checks"] if c["name"] == "regression")
    assert check["ok"] is False and "max_drop" not in check["allowed"]
    assert reports["other"]["status"] == "pass", "an eval that did not opt in is not compared"


def test_the_same_level_as_the_default_branch_is_no_regression(project: Path) -> None:
    write_project(project, 0.90)
    main_history(project, [0.90, 0.902, 0.898, 0.90, 0.901, 0.899])
    triage = decide(project, pull_request_env(project))["triage"]
    assert triage["status"] == "pass"
    check = next(c for c in triage["checks"] if c["name"] == "regression")
    assert check["ok"] is True and "(ok)" in check["allowed"]


def test_on_the_default_branch_nothing_is_compared(project: Path, tmp_path: Path) -> None:
    write_project(project, 0.80)
    main_history(project, [0.90, 0.91, 0.89, 0.90])
    event = tmp_path / "push.json"
    event.write_text(json.dumps({"repository": {"default_branch": "main"}}))
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "push",
        "GITHUB_REF": "refs/heads/main",
        "GITHUB_EVENT_PATH": str(event),
    }
    triage = decide(project, env)["triage"]
    assert triage["status"] == "pass" and all(c["name"] != "regression" for c in triage["checks"])


@pytest.mark.parametrize("runs", [0, 2])
def test_too_little_history_gives_no_verdict_and_no_failure(project: Path, runs: int) -> None:
    write_project(project, 0.80)
    main_history(project, [0.90] * runs)
    triage = decide(project, pull_request_env(project))["triage"]
    assert triage["status"] == "pass"
    check = next(c for c in triage["checks"] if c["name"] == "regression")
    assert check["ok"] is True and "no-baseline" in check["allowed"]


def test_an_unclear_drop_gets_trials_up_to_max_k_when_they_can_settle_it(project: Path) -> None:
    (project / "firewall.toml").write_text(
        CONFIG.replace("max_drop = 0.01 }", "max_drop = 0.01 }\nflakiness = 0.1")
    )
    (project / "score.py").write_text(  # a spread of 0.02 a trial: 7 trials cannot tell
        "import sys\nprint(0.90 + (int(sys.argv[1]) % 3 - 1) * 0.02)\n"
    )
    # The default branch's runs hardly drift: their means differ by their trials' noise.
    main_history(project, [0.90, 0.901, 0.899, 0.90, 0.9005, 0.8995], sd=0.02)
    triage = decide(project, pull_request_env(project))["triage"]
    check = next(c for c in triage["checks"] if c["name"] == "regression")
    assert len(triage["trials"]) == 15
    assert triage["stop"]["trials"] == 15 and triage["stop"]["planned"] == 7
    assert "(ok)" in check["allowed"], triage["reason"]


def test_drift_between_default_branch_runs_gets_no_trials_and_says_so(project: Path) -> None:
    (project / "firewall.toml").write_text(
        CONFIG.replace("max_drop = 0.01 }", "max_drop = 0.01 }\nflakiness = 0.1")
    )
    (project / "score.py").write_text(
        "import sys\nprint(0.895 + (int(sys.argv[1]) % 3 - 1) * 0.03)\n"
    )
    # Runs that move by about 0.01 between them: no number of this run's trials helps.
    main_history(project, [0.90, 0.915, 0.885, 0.90, 0.91, 0.89])
    triage = decide(project, pull_request_env(project))["triage"]
    check = next(c for c in triage["checks"] if c["name"] == "regression")
    assert "(unclear)" in check["allowed"] and len(triage["trials"]) == 7
    assert "run-to-run drift 0.01" in str(triage["reason"])
    assert "limits detection to drops of" in str(triage["reason"])


def test_a_change_that_makes_a_stable_eval_unstable_fails(project: Path) -> None:
    write_project(project, 0.90)
    (project / "score.py").write_text(  # every third trial 0.2 lower: quarantined alone
        "import sys\nprint(0.90 - (int(sys.argv[1]) % 3 == 0) * 0.2)\n"
    )
    main_history(project, [0.90, 0.902, 0.898, 0.90, 0.901, 0.899])
    triage = decide(project, pull_request_env(project))["triage"]
    assert triage["status"] == "fail" and triage["blocking"] is True
    reason = str(triage["reason"])
    assert reason.startswith("regression: unstable here, where main's last 6 runs were stable")
    assert "drop 0.0" in reason, "the unstable probe's mean is compared as well"


def test_an_eval_unstable_on_the_default_branch_too_stays_in_quarantine(project: Path) -> None:
    write_project(project, 0.90)
    (project / "score.py").write_text(
        "import sys\nprint(0.90 + (int(sys.argv[1]) % 2 * 2 - 1) * 0.1)\n"  # scatters, same mean
    )
    main_history(project, [0.90, 0.902, 0.898, 0.90, 0.901, 0.899], status="quarantine")
    triage = decide(project, pull_request_env(project))["triage"]
    assert triage["status"] == "quarantine" and "vs main's last 6 runs" in str(triage["reason"])
