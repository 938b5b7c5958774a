"""Affected-only runs sharded as CI shards them: `firewall probe --shard I/2` in two jobs,
each on its own checkout, then `firewall gate` on a third with the parts downloaded.

The default branch's sharded runs keep fingerprints (a part names what its workers read,
the gate hashes its own checkout's files), so a pull request's probes can carry from
them; the gate decides again what a part says it carried, and a tampered part can make
it carry nothing, nor hash a file outside the checkout.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from actions import checkout, job_env
from gitrepos import make_origin
from test_affected_jobs import (
    FIREWALL,
    PROJECT,
    REPOSITORY,
    Jobs,
    carried,
    probed,
    why,
)

pytestmark = pytest.mark.e2e

EVERY = {"triage-accuracy", "triage-tone", "summary", "lookup", "smoke"}


class ShardedJobs(Jobs):
    """Every job of `Jobs` as two probe jobs and a gate job, each on a checkout of its own.
    ``tamper`` edits the downloaded parts before the gate reads them."""

    def __init__(self, origin: Path, root: Path) -> None:
        super().__init__(origin, root)
        self.tamper: Callable[[list[Path]], None] | None = None
        self.gate_args: tuple[str, ...] = ()
        self.parts: list[Path] = []

    def _job(
        self, ref: str, sha: str, payload: dict[str, object], args: tuple[str, ...], code: int
    ) -> tuple[dict[str, Any], str]:
        downloads = self.root / f"parts-{self.count}"
        downloads.mkdir()
        said = ""
        for index in (1, 2):
            part = downloads / f"part-{index}.json"
            proc = self._firewall(
                ref, sha, payload, ["probe", "--shard", f"{index}/2", "--seed", "7", "--out"]
            )(str(part), *args)
            said += proc.stdout + proc.stderr
            assert proc.returncode == 0, said
        self.parts = sorted(downloads.glob("part-*.json"))
        if self.tamper is not None:
            self.tamper(self.parts)
        proc = self._firewall(ref, sha, payload, ["gate", "--no-issues", *self.gate_args])(
            *map(str, self.parts)
        )
        said += proc.stdout + proc.stderr
        assert proc.returncode == code, said
        report_path = self.workspace / "firewall-report.json"
        report = json.loads(report_path.read_text()) if report_path.exists() else {}
        return report, said

    def _firewall(
        self, ref: str, sha: str, payload: dict[str, object], command: list[str]
    ) -> Callable[..., subprocess.CompletedProcess[str]]:
        self.count += 1
        self.workspace = checkout(self.origin, self.root / f"job-{self.count}", ref=ref, sha=sha)
        pull = ref.startswith("refs/pull/")
        pull_request: Any = payload.get("pull_request", {})
        head = pull_request.get("head", {}).get("ref", "")
        env = job_env(
            self.workspace,
            event_name="pull_request" if pull else "push",
            payload=payload,
            ref=ref,
            sha=sha,
            repository=REPOSITORY,
            head_ref=str(head) if pull else "",
            base_ref="main" if pull else "",
        )
        workspace = self.workspace

        def run(*more: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [FIREWALL, *command, *more],
                cwd=workspace,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )

        return run


def part_json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def edit(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = part_json(path)
    change(data)
    path.write_text(json.dumps(data))


@pytest.fixture
def jobs(tmp_path: Path) -> ShardedJobs:
    jobs = ShardedJobs(make_origin(tmp_path, PROJECT, branch="main"), tmp_path)
    report, _ = jobs.push()  # the default branch's sharded run, kept on the state branch
    assert probed(report) == EVERY
    assert all(e["fingerprint"] for e in report["evals"]), "every eval fingerprinted"
    parts = [part_json(path) for path in jobs.parts]
    assert all(part["carried"] is None for part in parts), "a push probes every eval"
    reads = {target for part in parts for target in part["reads"]}
    assert reads == {
        "evals.triage:accuracy",
        "evals.triage:tone",
        "evals.summary:quality",
        "evals.lookup:hits",
    }
    return jobs


def test_a_sharded_pull_request_probes_exactly_the_evals_its_change_reaches(
    jobs: ShardedJobs,
) -> None:
    report, said = jobs.pull({"prompts/triage.txt": "Sort the ticket, kindly.\n"})
    assert probed(report) == {"triage-accuracy", "triage-tone"}
    assert carried(report) == {"summary", "lookup", "smoke"}
    assert why(report, "triage-tone") == "prompts/triage.txt changed"
    assert report["run"]["saved"]["evals"] == 3
    assert "affected-only: 3 of 5 evals carried from main" in said
    claimed = sorted(e for path in jobs.parts for e in part_json(path)["carried"])
    assert claimed == ["lookup", "smoke", "summary"]
    assert all(e["fingerprint"] for e in report["evals"]), "probed ones stamped by the gate"


def test_a_sharded_pull_request_changing_nothing_evaluable_carries_every_eval(
    jobs: ShardedJobs,
) -> None:
    report, said = jobs.pull({"README.md": "# evals\n\nNow with a paragraph.\n"})
    assert probed(report) == set() and carried(report) == EVERY
    assert report["summary"]["exit_code"] == 0 and report["summary"]["trials"] == 0
    assert "affected-only: 5 of 5 evals carried from main" in said


def test_all_makes_the_probes_probe_every_eval(jobs: ShardedJobs) -> None:
    report, _ = jobs.pull({"README.md": "# changed\n"}, "--all")
    assert probed(report) == EVERY and report["run"]["saved"] is None


def drop(eval_id: str) -> Callable[[list[Path]], None]:
    """A tamper: the part that probed ``eval_id`` says it carried it instead."""

    def change(parts: list[Path]) -> None:
        for path in parts:
            data = part_json(path)
            if eval_id in data["trials"]:
                data["trials"].pop(eval_id)
                data["specs"] = [s for s in data["specs"] if s["id"] != eval_id]
                data["carried"] = sorted([*(data["carried"] or []), eval_id])
                path.write_text(json.dumps(data))

    return change


def test_a_part_cannot_carry_an_eval_its_change_reaches(jobs: ShardedJobs) -> None:
    jobs.tamper = drop("triage-tone")
    _, said = jobs.pull({"prompts/triage.txt": "Sort the ticket, kindly.\n"}, code=2)
    assert (
        "eval 'triage-tone' was carried by its probe, but here it would be probed: "
        "prompts/triage.txt changed" in said
    )
    jobs.gate_args = ("--allow-partial",)
    report, said = jobs.pull({"prompts/triage.txt": "Sort the ticket, firmly.\n"})
    assert "triage-tone" not in {e["id"] for e in report["evals"]}
    assert any("triage-tone" in lack for lack in report["run"]["partial"])


def test_a_part_cannot_carry_an_eval_the_configuration_does_not_know(jobs: ShardedJobs) -> None:
    def invent(parts: list[Path]) -> None:
        edit(parts[0], lambda data: data.update(carried=[*(data["carried"] or []), "ghost"]))

    jobs.tamper = invent
    _, said = jobs.pull({"README.md": "# changed\n"}, code=2)
    assert "eval 'ghost' is not in the configuration" in said


def test_a_part_cannot_name_a_file_outside_the_checkout(jobs: ShardedJobs) -> None:
    def outside(parts: list[Path]) -> None:
        def change(data: dict[str, Any]) -> None:
            reads: Mapping[str, list[str]] = data["reads"]
            data["reads"] = {**reads, "evals.lookup:hits": ["../../etc/passwd"]}

        edit(parts[0], change)

    jobs.tamper = outside
    _, said = jobs.pull({"prompts/triage.txt": "Sort the ticket, kindly.\n"}, code=2)
    assert "'../../etc/passwd', which is not a path inside the checkout" in said
