"""The verdict: every change of an eval's status after the policy, and the exit code.

The policy (``firewall.policy``) decides each eval from its own trials. Three
things can change that status afterwards, and they are all here, in the order a
command applies them:

    policy's status
      -> in quarantine     an eval the registry holds reads QUARANTINED, never blocking;
                           one failing consistently reads FAIL: broken is not flaky
      -> regression        a drop against the default branch's runs reads FAIL, and so
                           does an eval stable there and unstable on this change
      -> tonight           the nightly's lifecycle: QUARANTINED with its streak,
                           or the probe's own status once released or adopted
      -> summary           the counts, and the exit code read from them, once

The exit code has one truth, the artefact's summary: the terminal, the report,
``$GITHUB_OUTPUT`` and the process all read it (an interrupted run is 130 there
too, and a nightly that finished is 0 whatever it found).
"""

from __future__ import annotations

from collections.abc import Sequence

from firewall.artefact import EvalReport, Summary
from firewall.errors import ExitCode
from firewall.lifecycle import Entry, Event
from firewall.policy import Check, Status
from firewall.regression import Judgement


def broken(report: EvalReport) -> bool:
    """Whether a probe shows an eval failing consistently, not scattering: every scored
    trial failed, or it is stable and its median is below the threshold."""
    if report.status is not Status.FAIL:
        return False
    scored = [t for t in report.trials if t.error is None and t.score is not None]
    every_trial = bool(scored) and not any(t.passed for t in scored)
    below = any(check.name == "median" and not check.ok for check in report.checks)
    return every_trial or below


def in_quarantine(report: EvalReport, entry: Entry | None) -> EvalReport:
    """An eval the registry holds, probed anyway (``--include-quarantined``, or a case whose
    suite ran for its other cases): it stays QUARANTINED and non-blocking, with what the
    probe found in its reason; unless it is broken, which is not flaky (contract §4): then
    it is the FAIL it is, blocking as the eval does."""
    if entry is None:
        return report
    if broken(report):
        return report.model_copy(
            update={"reason": f"{_flaky_since(entry)}, now failing consistently: {report.reason}"}
        )
    return report.model_copy(
        update={
            "status": Status.QUARANTINED,
            "blocking": False,
            "reason": f"in quarantine, probed {report.status.label}: {report.reason}",
        }
    )


def against_default_branch(
    report: EvalReport,
    verdict: Judgement,
    limit: float,
    *,
    stable_runs: int = 0,
    base: str = "the default branch",
) -> EvalReport:
    """The regression check's word: a drop significantly beyond ``limit`` is a FAIL like any
    other (a non-blocking eval still only warns); an unclear one says so in the reason.

    A probe the policy found unstable is compared too, and is a regression in itself
    when the default branch's last ``stable_runs`` runs were all stable: the change made
    the eval flaky, which is not the quarantine's to absorb (issue 23). Otherwise it
    stays QUARANTINE, with its comparison in the reason.
    """
    comparison = verdict.comparison
    unstable = report.status is Status.QUARANTINE
    destabilised = unstable and stable_runs > 0
    regressed = verdict.verdict == "regression" or destabilised
    actual = f"drop {comparison.drop:.3f}" if comparison else "no baseline"
    check = Check(
        name="regression",
        ok=not regressed,
        actual=f"{actual}, unstable" if destabilised else actual,
        allowed=f"<= {limit:g} ({verdict.verdict}){', stable' if destabilised else ''}",
    )
    update: dict[str, object] = {"checks": [*report.checks, check]}
    if destabilised:
        said = f"; {verdict.reason}" if comparison is not None else ""
        update.update(
            status=Status.FAIL,
            reason=f"regression: unstable here, where {base}'s last {stable_runs} runs were "
            f"stable: {report.reason}{said}",
        )
    elif verdict.verdict == "regression":
        also = f"; also unstable: {report.reason}" if unstable else ""
        update.update(status=Status.FAIL, reason=f"{verdict.reason}{also}")
    elif verdict.verdict == "unclear" or (unstable and comparison is not None):
        update["reason"] = f"{report.reason}; {verdict.reason}"
    return report.model_copy(update=update)


def tonight(report: EvalReport, event: Event | None) -> EvalReport:
    """The nightly's word: a still-quarantined eval reads QUARANTINED with its streak; a
    released or newly adopted one keeps the probe's own status; a broken one reads FAIL
    (the nightly never blocks), and says it will fail the gate once released."""
    if event is None or event.kind in ("released", "quarantined"):
        return report
    if broken(report):
        return report.model_copy(
            update={
                "reason": f"quarantined as flaky, now failing consistently: {report.reason}; "
                f"{event.message}; once released it fails the gate"
            }
        )
    return report.model_copy(update={"status": Status.QUARANTINED, "reason": event.message})


def _flaky_since(entry: Entry) -> str:
    return f"quarantined as flaky since {entry.since:%Y-%m-%d}"


def summarise(reports: Sequence[EvalReport], complete: bool, *, blocks: bool = True) -> Summary:
    """The counts by status and the exit code they make (contract §5). ``blocks=False``
    (the nightly) exits 0 whatever it found; an interrupted run is 130 either way."""
    counts = dict.fromkeys(Status, 0)
    for report in reports:
        counts[report.status] += 1
    blocking = [report for report in reports if report.blocking] if blocks else []
    if not complete:
        code = ExitCode.INTERRUPTED
    elif any(report.status is Status.FAIL for report in blocking):
        code = ExitCode.FAIL
    elif any(report.status is Status.ERROR for report in blocking):
        code = ExitCode.ERROR
    else:
        code = ExitCode.OK
    stops = [report.stop for report in reports if report.stop is not None]
    return Summary(
        **{"pass": counts[Status.PASS]},
        fail=counts[Status.FAIL],
        quarantine=counts[Status.QUARANTINE],
        quarantined=counts[Status.QUARANTINED],
        error=counts[Status.ERROR],
        exit_code=code,
        trials=sum(stop.trials for stop in stops),
        planned=sum(stop.planned for stop in stops),
    )
