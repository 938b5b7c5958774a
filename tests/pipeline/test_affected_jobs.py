"""Affected-only pull requests as GitHub Actions runs them: every job on its own checkout.

A push to the default branch probes every eval and keeps its fingerprints on the
state branch; each pull request's job, a fresh checkout of GitHub's merge commit
made as `actions/checkout@v4` makes it, probes only the evals its change can
reach and carries the rest. The project has what a real one has: a shared helper
module, one prompt file per eval family, a data file, a command eval that
declares its inputs. Which evals a job probed is read from its report.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from actions import checkout, job_env, open_pull_request, pull_request_payload, push_payload, tip
from gitrepos import fresh_clone, git, make_origin

pytestmark = pytest.mark.e2e

FIREWALL = shutil.which("firewall", path=str(Path(sys.executable).parent)) or "firewall"
REPOSITORY = "octo/evals"
CONFIG = """
k = 3
adaptive = false
seed = 7

[[evals]]
id = "triage-accuracy"
python = "evals.triage:accuracy"

[[evals]]
id = "triage-tone"
python = "evals.triage:tone"

[[evals]]
id = "summary"
python = "evals.summary:quality"

[[evals]]
id = "lookup"
python = "evals.lookup:hits"

[[evals]]
id = "smoke"
command = "python scripts/smoke.py"
inputs = ["scripts/*.py"]
"""
PROJECT = {
    "firewall.toml": CONFIG,
    "README.md": "# evals\n",
    "evals/__init__.py": "",
    "evals/helpers.py": (
        "from pathlib import Path\n\n"
        "def prompt(family):\n"
        "    return Path('prompts', family + '.txt').read_text()\n\n"
        "def score(text):\n"
        "    return 0.5 if 'bad' in text else 0.9\n"
    ),
    "evals/triage.py": (
        "from evals.helpers import prompt, score\n\n"
        "def accuracy(seed):\n    return score(prompt('triage'))\n\n"
        "def tone(seed):\n    return score(prompt('triage'))\n"
    ),
    "evals/summary.py": (
        "from evals import helpers\n\n"  # async: its trials run in the early pool's workers
        "async def quality(seed):\n    return helpers.score(helpers.prompt('summary'))\n"
    ),
    "evals/lookup.py": (
        "import json\n\n"
        "def hits(seed):\n"
        "    with open('data/cases.jsonl') as handle:\n"
        "        cases = [json.loads(line) for line in handle]\n"
        "    return sum(case['ok'] for case in cases) / len(cases)\n"
    ),
    "prompts/triage.txt": "Sort the ticket.\n",
    "prompts/summary.txt": "Summarise the thread.\n",
    "data/cases.jsonl": '{"ok": 1}\n{"ok": 1}\n',
    "scripts/smoke.py": "print(1.0)\n",
}
EVERY = {"triage-accuracy", "triage-tone", "summary", "lookup", "smoke"}


class Jobs:
    """CI jobs against one origin: pushes to `main`, and pull requests that change files."""

    def __init__(self, origin: Path, root: Path) -> None:
        self.origin, self.root, self.count = origin, root, 0

    def push(self, *args: str, code: int = 0) -> tuple[dict[str, Any], str]:
        sha = tip(self.origin, "main")
        payload = push_payload(REPOSITORY, "main", branch="main", before=sha, after=sha)
        return self._job("refs/heads/main", sha, payload, args, code)

    def pull(
        self, changes: Mapping[str, str], *args: str, code: int = 0, number: int = 0
    ) -> tuple[dict[str, Any], str]:
        """A pull request whose branch changes ``changes`` (path -> new text)."""
        self.count += 1
        number = number or self.count
        head = f"feature-{number}"
        author = fresh_clone(self.origin, self.root / f"author-{self.count}")
        git(author, "checkout", "--quiet", "-B", head, "origin/main")
        for path, text in changes.items():
            (author / path).parent.mkdir(parents=True, exist_ok=True)
            (author / path).write_text(text)
        git(author, "add", "--all")
        git(author, "commit", "--quiet", "--allow-empty", "-m", f"change {sorted(changes)}")
        git(author, "push", "--quiet", "--force", "origin", f"HEAD:refs/heads/{head}")
        base = tip(self.origin, "main")
        merge = open_pull_request(self.origin, self.root, number=number, base="main", head=head)
        payload = pull_request_payload(
            REPOSITORY,
            "main",
            number=number,
            head=head,
            head_sha=tip(self.origin, head),
            base="main",
            base_sha=base,
        )
        return self._job(f"refs/pull/{number}/merge", merge, payload, args, code)

    def _job(
        self, ref: str, sha: str, payload: dict[str, object], args: tuple[str, ...], code: int
    ) -> tuple[dict[str, Any], str]:
        self.count += 1
        workspace = checkout(self.origin, self.root / f"job-{self.count}", ref=ref, sha=sha)
        pull = ref.startswith("refs/pull/")
        pull_request = payload.get("pull_request", {})
        assert isinstance(pull_request, dict)
        env = job_env(
            workspace,
            event_name="pull_request" if pull else "push",
            payload=payload,
            ref=ref,
            sha=sha,
            repository=REPOSITORY,
            head_ref=str(pull_request.get("head", {}).get("ref", "")) if pull else "",
            base_ref="main" if pull else "",
        )
        proc = subprocess.run(
            [FIREWALL, "run", "--no-issues", *args],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        said = proc.stdout + proc.stderr
        assert proc.returncode == code, said
        report: dict[str, Any] = json.loads((workspace / "firewall-report.json").read_text())
        summary = Path(env["GITHUB_STEP_SUMMARY"])
        self.summary = summary.read_text() if summary.exists() else ""
        return report, said


def probed(report: Mapping[str, Any]) -> set[str]:
    return {e["id"] for e in report["evals"] if not e.get("carried")}


def carried(report: Mapping[str, Any]) -> set[str]:
    return {e["id"] for e in report["evals"] if e.get("carried")}


def why(report: Mapping[str, Any], eval_id: str) -> str:
    (found,) = [e for e in report["evals"] if e["id"] == eval_id]
    return str(found.get("affected"))


@pytest.fixture
def jobs(tmp_path: Path) -> Jobs:
    origin = make_origin(tmp_path, PROJECT, branch="main")
    jobs = Jobs(origin, tmp_path)
    report, _ = jobs.push()  # the default branch's probes, kept on the state branch
    assert probed(report) == EVERY and all(e["fingerprint"] for e in report["evals"])
    return jobs


def test_a_pull_request_probes_exactly_the_evals_its_change_reaches(jobs: Jobs) -> None:
    report, said = jobs.pull({"prompts/triage.txt": "Sort the ticket, kindly.\n"})
    assert probed(report) == {"triage-accuracy", "triage-tone"}
    assert why(report, "triage-tone") == "prompts/triage.txt changed"
    assert carried(report) == {"summary", "lookup", "smoke"}
    saved = report["run"]["saved"]
    assert saved["evals"] == 3 and saved["trials"] == 9
    assert "affected-only: 3 of 5 evals carried from main" in said
    assert "probed triage-tone: prompts/triage.txt changed" in said
    assert "**Affected-only:** 3 of 5 evals carried from main" in jobs.summary

    report, _ = jobs.pull({"data/cases.jsonl": '{"ok": 1}\n{"ok": 1}\n{"ok": 1}\n'})
    assert probed(report) == {"lookup"}, "the eval that opened the data file, no other"

    report, _ = jobs.pull({"scripts/smoke.py": "print(0.95)\n"})
    assert probed(report) == {"smoke"}, "a command eval's declared inputs"


def test_a_changed_helper_module_re_probes_every_eval_that_imports_it_and_no_other(
    jobs: Jobs,
) -> None:
    helpers = PROJECT["evals/helpers.py"] + "\n# clearer names to come\n"
    report, _ = jobs.pull({"evals/helpers.py": helpers})
    assert probed(report) == {"triage-accuracy", "triage-tone", "summary"}
    assert why(report, "summary") == "evals/helpers.py changed"
    assert carried(report) == {"lookup", "smoke"}


def test_a_changed_threshold_re_probes_that_eval(jobs: Jobs) -> None:
    config = CONFIG.replace(
        'python = "evals.summary:quality"', 'python = "evals.summary:quality"\nthreshold = 0.85'
    )
    report, _ = jobs.pull({"firewall.toml": config})
    assert probed(report) == {"summary"}
    assert why(report, "summary") == "its settings changed"


def test_a_change_to_nothing_evaluable_probes_nothing_and_passes(jobs: Jobs) -> None:
    report, said = jobs.pull({"README.md": "# evals\n\nNow with a paragraph.\n"})
    assert probed(report) == set() and carried(report) == EVERY
    assert report["summary"]["exit_code"] == 0 and report["summary"]["trials"] == 0
    assert "affected-only: 5 of 5 evals carried from main" in said


def test_all_and_the_config_switch_probe_every_eval(jobs: Jobs) -> None:
    report, _ = jobs.pull({"README.md": "# changed\n"}, "--all")
    assert probed(report) == EVERY and report["run"]["saved"] is None
    config = CONFIG + "\n[affected]\nenabled = false\n"
    report, _ = jobs.pull({"firewall.toml": config})
    assert probed(report) == EVERY


def test_a_new_or_renamed_eval_is_probed(jobs: Jobs) -> None:
    config = CONFIG.replace('id = "lookup"', 'id = "lookup-renamed"')
    report, _ = jobs.pull({"firewall.toml": config})
    assert probed(report) == {"lookup-renamed"}
    assert why(report, "lookup-renamed").startswith("new: no probe on main")


def test_a_carried_fail_does_not_block_the_pull_request(tmp_path: Path) -> None:
    failing = {**PROJECT, "prompts/summary.txt": "a bad prompt\n"}
    jobs = Jobs(make_origin(tmp_path, failing, branch="main"), tmp_path)
    report, _ = jobs.push(code=1)  # the default branch fails summary: its problem
    report, said = jobs.pull({"prompts/triage.txt": "Sort the ticket, kindly.\n"})
    (summary,) = [e for e in report["evals"] if e["id"] == "summary"]
    assert summary["carried"] and summary["status"] == "fail" and not summary["blocking"]
    assert report["summary"]["exit_code"] == 0
    assert "failing on the default branch, carried and not blocking: summary" in said


def test_without_a_default_branch_probe_every_eval_is_probed(tmp_path: Path) -> None:
    jobs = Jobs(make_origin(tmp_path, PROJECT, branch="main"), tmp_path)
    report, _ = jobs.pull({"README.md": "# changed\n"})  # main never ran
    assert probed(report) == EVERY
    assert why(report, "summary") == "new: no probe on main in the last 7 days"
