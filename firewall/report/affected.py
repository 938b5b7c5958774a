"""What an affected-only run says of itself: how many evals it carried from the default
branch, what that saved (trials, seconds, dollars), and which input made each probed
eval count as affected. One source for the terminal, the job summary and the comment."""

from __future__ import annotations

from firewall.artefact import Artefact
from firewall.policy import Status

SHOWN = 20  # probed evals named one by one; the artefact has every one


def saving(artefact: Artefact) -> str | None:
    """One line: what was carried and what it saved; None when the run probed everything."""
    saved = artefact.run.saved
    if saved is None:
        return None
    branch = next((r.carried.branch for r in artefact.evals if r.carried), "the default branch")
    total = len(artefact.evals)
    if not saved.evals:
        return f"affected-only: all {total} evals probed, none carried from {branch}"
    cost = f", ${saved.cost_usd:.2f}" if saved.cost_usd is not None else ""
    return (
        f"affected-only: {saved.evals} of {total} evals carried from {branch} (not probed): "
        f"{saved.trials} trials, {saved.seconds:.0f} s{cost} saved"
    )


def reasons(artefact: Artefact, *, shown: int = SHOWN) -> list[str]:
    """Each probed eval with what made it affected (``prompts/triage.txt changed``)."""
    probed = [(r.id, r.affected) for r in artefact.evals if r.affected]
    lines = [f"{eval_id}: {why}" for eval_id, why in probed[:shown]]
    if len(probed) > shown:
        lines.append(f"... and {len(probed) - shown} more: the report names every one")
    return lines


def carried_failures(artefact: Artefact) -> list[str]:
    """The carried evals that fail on the default branch: its problem, said, not blocking."""
    return [r.id for r in artefact.evals if r.carried and r.status in (Status.FAIL, Status.ERROR)]


def terminal_lines(artefact: Artefact) -> list[str]:
    line = saving(artefact)
    if line is None:
        return []
    lines = [line, *(f"  probed {reason}" for reason in reasons(artefact))]
    failing = carried_failures(artefact)
    if failing:
        lines.append(
            f"  failing on the default branch, carried and not blocking: {', '.join(failing)}"
        )
    return lines


def markdown(artefact: Artefact, *, shown: int = SHOWN) -> str:
    """The same as Markdown, for the job summary and the pull-request comment."""
    line = saving(artefact)
    if line is None:
        return ""
    parts = [line.replace("affected-only:", "**Affected-only:**", 1)]
    parts += [f"- probed `{reason.replace('`', '')}`" for reason in reasons(artefact, shown=shown)]
    failing = carried_failures(artefact)
    if failing:
        names = ", ".join(f"`{eval_id}`" for eval_id in failing)
        parts.append(
            f"Failing on the default branch, carried and not blocking this pull request: {names}"
        )
    return "\n".join(parts)
