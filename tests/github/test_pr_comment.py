"""The pull request's one comment: what it says, how it is found again, and that GitHub
failing to take it changes nothing.

First the Markdown alone (``report.comment``), then real PyGithub against the stand-in
(``github.comment``), then `firewall run` in a pull-request job.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from actions import pull_request_payload
from builders import make_artefact, make_report
from click.testing import CliRunner
from github_standin import GitHubStandIn
from issue_builders import FAST

from firewall.artefact import Artefact
from firewall.cli import main
from firewall.github.budget import Budget
from firewall.github.comment import GitHubComment, fork_of, job_of, publish_comment, summary_url
from firewall.policy import Status
from firewall.report.comment import MARKER, MAX_COMMENT, baseline, marker, render_comment
from firewall.store.history import HistoryRow
from firewall.timeutil import now, to_text

RUN_PAGE = "https://github.com/acme/widgets/actions/runs/4242/attempts/2"


def changed_run() -> Artefact:
    return make_artefact(
        make_report("steady", Status.PASS),
        make_report("broke", Status.FAIL, reason="median 0.2 < threshold 0.85"),
        make_report("wobbly", Status.QUARANTINE, reason="IQR 0.4 > 0.03", owner="alice"),
        make_report("mended", Status.PASS),
        make_report("brand-new", Status.ERROR, reason="judge unavailable", blocking=False),
        git_ref="refs/pull/7/merge",
    )


MAIN = {
    "steady": Status.PASS,
    "broke": Status.PASS,
    "wobbly": Status.PASS,
    "mended": Status.FAIL,
}


def bullets(text: str, heading: str) -> list[str]:
    """The list items under a bold heading."""
    block = text.split(f"**{heading}**", 1)[1].split("\n\n**", 1)[0].split("\n\n<sub>")[0]
    return [line for line in block.splitlines() if line.startswith("- ")]


# --- what the comment says


def test_the_comment_has_the_counts_what_changed_against_main_and_the_summary_link() -> None:
    text = render_comment(changed_run(), MAIN, default_branch="main", summary_url=RUN_PAGE)

    assert text.splitlines()[0] == MARKER
    assert "## ❌ Flakiness Firewall: FAIL" in text
    assert "**2** passed · **1** failed · **1** errored · **1** newly quarantined" in text
    assert "Against the latest probe of each eval on `main`:" in text
    assert bullets(text, "Newly failing") == [
        "- ❌ `broke` FAIL (PASS on `main`): `median 0.2 < threshold 0.85`",
        "- ⚠️ `brand-new` ERROR, non-blocking (new: no probe on `main`): `judge unavailable`",
    ]
    assert bullets(text, "Newly quarantined") == [
        "- 🚧 `wobbly` (PASS on `main`, owner `alice`): `IQR 0.4 > 0.03`"
    ]
    assert bullets(text, "Fixed") == ["- ✅ `mended` (FAIL on `main`)"]
    assert f"[The job summary]({RUN_PAGE}) has every eval" in text
    assert "`steady`" not in text, "an eval that did as it does on main is not news"


def test_a_run_that_changed_nothing_says_so() -> None:
    run = make_artefact(make_report("steady", Status.PASS), make_report("old", Status.FAIL))

    text = render_comment(run, {"steady": Status.PASS, "old": Status.FAIL}, default_branch="trunk")

    assert "Nothing changed against the latest probe of each eval on `trunk`." in text
    assert "**Newly failing**" not in text and "**Fixed**" not in text
    assert "The job summary has every eval" in text, "no link without the run's page"


def test_without_a_probe_on_main_every_eval_counts_as_new() -> None:
    text = render_comment(changed_run(), {}, default_branch="main")

    assert "`main` has no probe of these evals in the history of the last 30 days" in text
    assert "- ❌ `broke` FAIL (new: no probe on `main`)" in text
    assert "**Fixed**" not in text

    unknown = render_comment(changed_run(), {}, default_branch=None)
    assert "The default branch is not known here" in unknown
    assert "(new: no probe on the default branch)" in unknown


def test_the_baseline_is_the_default_branchs_latest_decided_probe_of_each_eval() -> None:
    def row(
        eval_id: str, status: str, at: str, ref: str = "refs/heads/main", mode: str = "run"
    ) -> HistoryRow:
        return HistoryRow(eval_id, "r", mode, status, 7, f"2026-11-{at}T03:00:00Z", git_ref=ref)

    rows = [
        row("a", "fail", "01"),
        row("a", "pass", "03"),
        row("a", "fail", "02"),  # written late: the newer probe still wins
        row("b", "fail", "04", ref="refs/pull/7/merge"),  # a pull request's row
        row("b", "pass", "01"),
        row("c", "pass", "05", mode="rollup"),  # the shared history's weekly roll-up
        row("d", "exploded", "05"),  # a status this firewall does not know
        row("e", "quarantined", "05", mode="nightly"),
        row("f", "pass", "05", ref="refs/heads/feature"),
    ]

    assert baseline(rows, "main") == {"a": Status.PASS, "b": Status.PASS, "e": Status.QUARANTINED}


def test_quarantined_on_main_is_not_newly_quarantined() -> None:
    run = make_artefact(make_report("wobbly", Status.QUARANTINE))

    for before in (Status.QUARANTINE, Status.QUARANTINED):
        text = render_comment(run, {"wobbly": before}, default_branch="main")
        assert "**Newly quarantined**" not in text and "Nothing changed" in text


def test_eval_text_pings_nobody_links_nothing_and_forges_no_marker() -> None:
    reason = "ask @octocat about #12 and `this` <!-- firewall:pull-request-comment --> [x](y)"
    run = make_artefact(
        make_report("noisy", Status.FAIL, reason=reason),
        make_report("owned", Status.QUARANTINE, owner="@acme/triage"),
    )

    text = render_comment(run, {}, default_branch="main")

    [noisy] = [line for line in text.splitlines() if "`noisy`" in line]
    quoted = noisy.split("): ", 1)[1]
    assert re.fullmatch(r"``[^`].*[^`]``", quoted), "one code span, its ticks longer than `"
    assert "@\u200doctocat" in quoted and "@octocat" not in text
    assert "#12" in quoted, "inside a code span GitHub links no reference"
    assert "owner `@\u200dacme/triage`" in text and "@acme" not in text
    assert text.count("<!--") == 1, "only the marker itself"
    assert "<\u200d!-- firewall:pull-request-comment -->" in quoted


def test_each_list_shows_at_most_fifty_evals_and_says_how_many_more() -> None:
    run = make_artefact(*(make_report(f"e{i:03}", Status.FAIL) for i in range(70)))

    text = render_comment(run, {f"e{i:03}": Status.PASS for i in range(70)}, default_branch="main")

    items = bullets(text, "Newly failing")
    assert "**Newly failing** (70)" in text
    assert len(items) == 51
    assert items[-1] == "- … and 20 more: the job summary has every eval"


def test_a_comment_over_githubs_limit_is_cut_and_says_how_many_were_left_out() -> None:
    long = "x" * 290
    reports = [make_report(f"f{i:03}", Status.FAIL, reason=long) for i in range(50)]
    reports += [make_report(f"q{i:03}", Status.QUARANTINE, reason=long) for i in range(50)]
    reports += [make_report(f"p{i:03}", Status.PASS) for i in range(50)]
    before = {r.id: Status.FAIL if r.status is Status.PASS else Status.PASS for r in reports}
    run = make_artefact(*reports)

    full = render_comment(run, before, default_branch="main")
    cut = render_comment(run, before, default_branch="main", limit=20_000)

    assert MAX_COMMENT >= len(full) > 20_000
    assert len(cut) <= 20_000
    assert cut.splitlines()[0] == MARKER and "has every eval" in cut.splitlines()[-1]
    assert len(bullets(cut, "Newly failing")) == 50, "the failures are the last to give way"
    quarantined, fixed = bullets(cut, "Newly quarantined"), bullets(cut, "Fixed")
    assert fixed == ["- … and 50 more: the job summary has every eval"]
    shown = len(quarantined) - 1
    assert quarantined[-1] == f"- … and {50 - shown} more: the job summary has every eval"


def test_the_summary_link_is_the_runs_attempt_page() -> None:
    env = {
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_REPOSITORY": "acme/widgets",
        "GITHUB_RUN_ID": "4242",
        "GITHUB_RUN_ATTEMPT": "2",
    }
    assert summary_url(env) == RUN_PAGE
    assert summary_url({**env, "GITHUB_RUN_ATTEMPT": ""}) == RUN_PAGE.rsplit("/attempts", 1)[0]
    assert summary_url({**env, "GITHUB_RUN_ID": "12; rm"}) is None
    assert summary_url({**env, "GITHUB_SERVER_URL": "javascript:alert(1)"}) is None


# --- on GitHub (the stand-in, through PyGithub)


@pytest.fixture
def hub() -> Iterator[GitHubStandIn]:
    with GitHubStandIn() as standin:
        yield standin


def pull_request(hub: GitHubStandIn) -> int:
    return hub.add_issue("Add the refund flow", "", pull=True)


def env_of(hub: GitHubStandIn) -> dict[str, str]:
    return {
        "GITHUB_TOKEN": hub.token,
        "GITHUB_REPOSITORY": hub.repository,
        "GITHUB_API_URL": hub.url,
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_RUN_ID": "4242",
        "GITHUB_RUN_ATTEMPT": "2",
    }


def post(
    hub: GitHubStandIn,
    number: int,
    run: Artefact | None = None,
    *,
    budget: Budget | None = None,
    dry_run: bool = False,
    said: list[str] | None = None,
) -> list[str]:
    return publish_comment(
        run or changed_run(),
        pull=number,
        before=MAIN,
        default_branch="main",
        env=env_of(hub),
        dry_run=dry_run,
        echo=(said if said is not None else []).append,
        budget=budget,
        transport=FAST,
    )


def test_the_first_run_creates_the_comment_and_every_later_run_edits_it(
    hub: GitHubStandIn,
) -> None:
    number = pull_request(hub)

    assert post(hub, number) == []
    [first] = hub.comments_on(number)
    assert first.startswith(MARKER) and "`broke` FAIL" in first and RUN_PAGE in first

    mended = make_artefact(make_report("broke", Status.PASS), make_report("steady", Status.PASS))
    assert post(hub, number, mended) == []

    [second] = hub.comments_on(number)
    assert "Nothing changed" in second and "## ✅ Flakiness Firewall: PASS" in second
    assert len(hub.calls("POST", r"/comments$")) == 1
    assert len(hub.calls("PATCH", r"/issues/comments/\d+$")) == 1


def test_the_same_comment_again_is_not_written_again(hub: GitHubStandIn) -> None:
    number = pull_request(hub)
    post(hub, number)
    post(hub, number)

    assert len(hub.comments_on(number)) == 1
    assert hub.calls("PATCH") == [] and len(hub.calls("POST")) == 1


def test_a_person_quoting_the_marker_is_left_alone(hub: GitHubStandIn) -> None:
    number = pull_request(hub)
    quote = f"> {MARKER}\n> ## ❌ Flakiness Firewall: FAIL\n\nwhy does `broke` fail, @bob?"
    hub.add_comment(number, quote)
    hub.add_comment(number, f"see {MARKER}")

    post(hub, number)

    bodies = hub.comments_on(number)
    assert bodies[:2] == [quote, f"see {MARKER}"]
    assert len(bodies) == 3 and bodies[2].startswith(MARKER)


def test_of_two_firewall_comments_the_oldest_is_edited_and_the_other_deleted(
    hub: GitHubStandIn,
) -> None:
    number = pull_request(hub)
    hub.add_comment(number, f"{MARKER}\nfrom one run", author="github-actions[bot]")
    hub.add_comment(number, "a person's word")
    hub.add_comment(number, f"{MARKER}\nfrom a run at the same time", author="github-actions[bot]")

    assert post(hub, number) == []

    bodies = hub.comments_on(number)
    assert len(bodies) == 2 and bodies[1] == "a person's word"
    assert bodies[0].startswith(MARKER) and "`broke` FAIL" in bodies[0]
    assert len(hub.calls("DELETE", r"/issues/comments/\d+$")) == 1


def test_a_comment_deleted_by_hand_is_created_anew(hub: GitHubStandIn) -> None:
    number = pull_request(hub)
    post(hub, number)
    [created] = hub.calls("POST", r"/comments$")
    hub.delete_comment(number, 1)

    post(hub, number, make_artefact(make_report("steady", Status.PASS)))

    [body] = hub.comments_on(number)
    assert "Nothing changed" in body and body != created.body["body"]
    assert len(hub.calls("POST", r"/comments$")) == 2


def test_the_comment_is_found_among_many_pages_of_comments(hub: GitHubStandIn) -> None:
    number = pull_request(hub)
    for index in range(130):
        hub.add_comment(number, f"review remark {index}")
    hub.add_comment(number, f"{MARKER}\nan older run's", author="github-actions[bot]")

    post(hub, number)

    assert len(hub.comments_on(number)) == 131
    assert "`broke` FAIL" in hub.comments_on(number)[-1]
    pages = hub.calls("GET", rf"/issues/{number}/comments$")
    assert [call.query.get("page", ["1"])[0] for call in pages] == ["1", "2"]


def post_as(hub: GitHubStandIn, number: int, workflow: str, job: str, run: Artefact) -> None:
    env = {**env_of(hub), "GITHUB_WORKFLOW": workflow, "GITHUB_JOB": job}
    warnings = publish_comment(
        run,
        pull=number,
        before=MAIN,
        default_branch="main",
        env=env,
        dry_run=False,
        echo=list[str]().append,
        transport=FAST,
    )
    assert warnings == []


def test_two_jobs_on_one_pull_request_keep_a_comment_each(hub: GitHubStandIn) -> None:
    number = pull_request(hub)
    failing = changed_run()
    passing = make_artefact(make_report("steady", Status.PASS))

    post_as(hub, number, "evals", "firewall", failing)
    post_as(hub, number, "evals", "inspect-tasks", passing)
    post_as(hub, number, "evals", "firewall", failing)  # each run edits its own job's only
    post_as(hub, number, "evals", "inspect-tasks", passing)

    first, second = hub.comments_on(number)
    assert first.splitlines()[0] == "<!-- firewall:pull-request-comment job=evals / firewall -->"
    assert "## ❌ Flakiness Firewall: FAIL · `evals / firewall`" in first
    assert second.splitlines()[0] == marker("evals / inspect-tasks")
    assert "## ✅ Flakiness Firewall: PASS · `evals / inspect-tasks`" in second
    assert len(hub.calls("POST", r"/comments$")) == 2
    assert hub.calls("PATCH") == []  # the same text again is not written again


def test_a_job_takes_over_the_comment_of_a_run_from_before_comments_were_per_job(
    hub: GitHubStandIn,
) -> None:
    number = pull_request(hub)
    hub.add_comment(number, f"{MARKER}\nan older release's", author="github-actions[bot]")

    post_as(hub, number, "evals", "firewall", changed_run())

    [body] = hub.comments_on(number)
    assert body.splitlines()[0] == marker("evals / firewall")
    assert hub.calls("POST", r"/comments$") == []


def test_a_jobs_name_cannot_end_the_marker_or_forge_another() -> None:
    forged = marker("evil --> <!-- firewall:pull-request-comment --> @team")

    assert forged.startswith("<!-- firewall:pull-request-comment job=evil ")
    assert forged.count("-->") == 1 and forged.endswith(" -->")
    assert "<!--" not in forged.removeprefix("<!--") and "@" not in forged


def test_the_job_is_the_workflow_and_job_id_and_the_shard() -> None:
    env = {"GITHUB_WORKFLOW": "evals", "GITHUB_JOB": "firewall"}

    assert job_of(env) == "evals / firewall"
    assert job_of(env, "2/4") == "evals / firewall (shard 2/4)"
    assert job_of({}) is None  # outside Actions: the bare marker


def post_leg(hub: GitHubStandIn, number: int, leg: str, run: Artefact) -> None:
    """A leg of the matrix of one job: the same workflow and job id, its own `job-key`."""
    env = {**env_of(hub), "GITHUB_WORKFLOW": "evals", "GITHUB_JOB": "gate"}
    warnings = publish_comment(
        run,
        pull=number,
        before=MAIN,
        default_branch="main",
        env={**env, "FIREWALL_JOB_KEY": leg},
        dry_run=False,
        echo=list[str]().append,
        transport=FAST,
    )
    assert warnings == []


PY310 = '{\n  "python-version": "3.10",\n  "os": "ubuntu-latest"\n}'  # as toJSON(matrix) prints
PY313 = '{\n  "python-version": "3.13",\n  "os": "ubuntu-latest"\n}'


def test_two_legs_of_a_matrix_on_one_pull_request_keep_a_comment_each(
    hub: GitHubStandIn,
) -> None:
    number = pull_request(hub)
    failing, passing = changed_run(), make_artefact(make_report("steady", Status.PASS))

    for _ in range(2):
        post_leg(hub, number, PY310, failing)
        post_leg(hub, number, PY313, passing)

    first, second = hub.comments_on(number)
    assert first.splitlines()[0] == marker("evals / gate (os=ubuntu-latest, python-version=3.10)")
    assert "FAIL · `evals / gate (os=ubuntu-latest, python-version=3.10)`" in first
    assert "PASS · `evals / gate (os=ubuntu-latest, python-version=3.13)`" in second
    assert len(hub.calls("POST", r"/comments$")) == 2 and hub.calls("PATCH") == []


def test_a_leg_takes_over_the_comment_the_legs_used_to_share(hub: GitHubStandIn) -> None:
    number = pull_request(hub)
    shared = f"{marker('evals / gate')}\nthe last leg's, overwritten in turns"
    hub.add_comment(number, shared, author="github-actions[bot]")

    post_leg(hub, number, PY310, changed_run())
    post_leg(hub, number, PY313, changed_run())

    first, second = hub.comments_on(number)
    assert first.splitlines()[0] == marker("evals / gate (os=ubuntu-latest, python-version=3.10)")
    assert second.splitlines()[0] == marker("evals / gate (os=ubuntu-latest, python-version=3.13)")
    assert len(hub.calls("POST", r"/comments$")) == 1


def test_the_job_names_its_matrix_leg_and_its_shard() -> None:
    env = {"GITHUB_WORKFLOW": "evals", "GITHUB_JOB": "gate", "FIREWALL_JOB_KEY": PY310}

    assert job_of(env, "2/4") == "evals / gate (os=ubuntu-latest, python-version=3.10, shard 2/4)"
    assert job_of({**env, "FIREWALL_JOB_KEY": "null"}) == "evals / gate"  # no matrix
    assert job_of({**env, "FIREWALL_JOB_KEY": '{"include": {"a": [1]}}'}) == (
        'evals / gate (include={"a":[1]})'
    )
    assert job_of({**env, "FIREWALL_JOB_KEY": " smoke  evals\n"}) == "evals / gate (smoke evals)"


def test_two_long_names_that_differ_past_the_cut_keep_two_markers() -> None:
    long = "evals / gate (" + ", ".join(f"axis{i}=value" for i in range(20))
    first, second = marker(long + ", last=1)"), marker(long + ", last=2)")

    assert first != second and len(first) == len(second)
    assert first.endswith(" -->") and first.count("-->") == 1


def test_the_comment_makes_no_pulls_call_so_issues_write_is_enough() -> None:
    """A private repository refuses `GET /pulls/N` to a token without `pull-requests: read`;
    the comment goes through the issue endpoints alone."""
    with GitHubStandIn(private=True, permissions={"issues": "write"}) as hub:
        number = pull_request(hub)

        assert post(hub, number) == []
        assert post(hub, number, make_artefact(make_report("steady", Status.PASS))) == []

        [body] = hub.comments_on(number)
        assert "Nothing changed" in body
        assert hub.calls(path=r"/pulls") == []


def test_pull_requests_write_alone_is_enough_too() -> None:
    with GitHubStandIn(private=True, permissions={"pull-requests": "write"}) as hub:
        number = pull_request(hub)

        assert post(hub, number) == []
        assert len(hub.comments_on(number)) == 1


def test_a_token_without_the_permission_is_told_which_it_needs() -> None:
    with GitHubStandIn(private=True, permissions={"contents": "write"}) as hub:
        number = pull_request(hub)

        [warning] = post(hub, number)

        assert "403 Resource not accessible by integration" in warning
        assert "`permissions: issues: write` (or `pull-requests: write`)" in warning
        assert "fork" not in warning


def test_a_fork_is_blamed_only_when_the_pull_request_comes_from_one(
    hub: GitHubStandIn, tmp_path: Path
) -> None:
    number = pull_request(hub)
    payload = pull_request_payload(
        hub.repository,
        "main",
        number=number,
        head="fix",
        head_sha="a" * 40,
        base="main",
        base_sha="b" * 40,
    )
    pull = payload["pull_request"]
    assert isinstance(pull, dict)
    head = pull["head"]
    head["repo"] = {**head["repo"], "full_name": "mallory/widgets"}
    event = tmp_path / "event.json"
    event.write_text(json.dumps(payload))
    hub.fail("read-only", method="POST", path=r"/comments$")

    [warning] = publish_comment(
        changed_run(),
        pull=number,
        before=MAIN,
        default_branch="main",
        env={**env_of(hub), "GITHUB_EVENT_PATH": str(event)},
        dry_run=False,
        echo=list[str]().append,
        transport=FAST,
    )

    assert "a pull request from the fork mallory/widgets gets a read-only GITHUB_TOKEN" in warning
    assert "permissions:" not in warning
    assert fork_of({"GITHUB_EVENT_PATH": str(event)}) == "mallory/widgets"
    head["repo"] = {**head["repo"], "full_name": "ACME/widgets"}
    event.write_text(json.dumps(payload))
    assert fork_of({"GITHUB_EVENT_PATH": str(event)}) is None
    assert fork_of({"GITHUB_EVENT_PATH": str(tmp_path / "none.json")}) is None


def test_a_repository_with_issues_disabled_still_takes_the_comment() -> None:
    with GitHubStandIn(has_issues=False) as hub:
        number = pull_request(hub)

        assert post(hub, number) == []

        [body] = hub.comments_on(number)
        assert body.startswith(MARKER)


FAILURES = {
    "read-only": "403 Resource not accessible by integration (the token may not write the pull "
    "request's conversation: give the job `permissions: issues: write` (or `pull-requests: "
    "write`), or pass a token that may as the action's `github-token`)",
    "rate-limit": "403 API rate limit exceeded for installation ID 4242. (it resets at ",
    "secondary-rate-limit": "You have exceeded a secondary rate limit.",
    "503": "503 Server Error (GitHub is having trouble; the next run tries again)",
    "401": "401 Bad credentials (is GITHUB_TOKEN valid and unexpired?)",
}


@pytest.mark.parametrize("mode", sorted(FAILURES))
def test_github_refusing_the_comment_is_one_warning(hub: GitHubStandIn, mode: str) -> None:
    number = pull_request(hub)
    hub.fail(mode, method="POST", path=r"/comments$")

    [warning] = post(hub, number)

    assert warning.startswith(f"GitHub refused to comment on pull request #{number}: ")
    assert FAILURES[mode] in warning
    assert warning.endswith(
        "; the decision and exit code stand, and the next run updates the pull request's comment"
    )
    assert hub.token not in warning and "\n" not in warning
    assert hub.comments_on(number) == []


def test_a_failed_edit_is_one_warning_and_leaves_the_comment(hub: GitHubStandIn) -> None:
    number = pull_request(hub)
    post(hub, number)
    before = hub.comments_on(number)
    hub.fail("503", method="PATCH")

    [warning] = post(hub, number, make_artefact(make_report("steady", Status.PASS)))

    assert warning.startswith(
        f"GitHub refused to edit the firewall's comment on pull request #{number}"
    )
    assert hub.comments_on(number) == before


@pytest.mark.parametrize("mode", ["not-json", "html", "wrong-shape"])
def test_an_answer_that_is_not_githubs_json_is_one_warning(hub: GitHubStandIn, mode: str) -> None:
    number = pull_request(hub)
    hub.fail(mode, method="GET", path=r"/comments$")

    [warning] = post(hub, number)

    assert warning.startswith(
        f"GitHub's answer to the request to find the firewall's comment on pull request #{number}"
    )
    assert hub.calls("POST") == [], "nothing is created on an answer it could not read"


def test_a_locked_pull_request_is_one_warning(hub: GitHubStandIn) -> None:
    number = pull_request(hub)
    hub.lock_issue(number)

    [warning] = post(hub, number)

    assert "403 Unable to create comment because issue is locked." in warning


def test_a_pull_request_that_is_not_there_is_one_warning(hub: GitHubStandIn) -> None:
    [warning] = post(hub, 99)

    assert warning.startswith("GitHub refused to find the firewall's comment on pull request #99")
    assert "404 Not Found" in warning


def test_a_spent_budget_skips_the_comment_with_one_warning(hub: GitHubStandIn) -> None:
    number = pull_request(hub)
    hub.fail("slow", delay=3.0)

    [warning] = post(hub, number, budget=Budget(0.5))

    assert "ran out" in warning and "(the pull request's comment)" in warning
    assert warning.endswith("if GitHub is only slow, raise `[github] budget`")


def test_a_dry_run_says_what_it_would_post_and_calls_nothing(hub: GitHubStandIn) -> None:
    number = pull_request(hub)
    said: list[str] = []

    assert post(hub, number, dry_run=True, said=said) == []

    assert said == [
        f"would comment on pull request #{number}, or edit the firewall's comment: FAIL; "
        "against main: 2 newly failing, 1 newly quarantined, 1 fixed"
    ]
    assert hub.requests == []


def test_without_a_token_nothing_is_posted_or_said(hub: GitHubStandIn) -> None:
    number = pull_request(hub)
    env = {"GITHUB_REPOSITORY": hub.repository, "GITHUB_API_URL": hub.url}

    warnings = publish_comment(
        changed_run(),
        pull=number,
        before=MAIN,
        default_branch="main",
        env=env,
        dry_run=False,
        echo=pytest.fail,
        transport=FAST,
    )

    assert warnings == [] and hub.requests == []


def test_the_comment_client_is_a_session_like_the_others(hub: GitHubStandIn) -> None:
    client = GitHubComment(hub.repository, hub.token, base_url=hub.url, transport=FAST)
    number = pull_request(hub)

    first = client.post(number, f"{MARKER}\none")
    again = client.post(number, f"{MARKER}\ntwo")

    assert first.created and not again.created and first.url == again.url
    assert f"/pull/{number}#issuecomment-" in first.url
    assert hub.comments_on(number) == [f"{MARKER}\ntwo"]


# --- `firewall run` in a pull-request job


@pytest.fixture
def job(project: Path, hub: GitHubStandIn, monkeypatch: pytest.MonkeyPatch) -> int:
    """A pull-request job with a passing eval and a failing one, and main's last run, where
    the passing one failed and the failing one passed; the pull request's number."""
    number = pull_request(hub)
    (project / "firewall.toml").write_text(
        "k = 3\nadaptive = false\n"
        '[[evals]]\nid = "good"\ncommand = "echo 0.9"\n'
        '[[evals]]\nid = "low"\ncommand = "echo 0.2"\n'
    )
    yesterday = to_text(now() - dt.timedelta(days=1))
    rows = [
        HistoryRow(eval_id, "main-run", "run", status, 3, yesterday, git_ref="refs/heads/main")
        for eval_id, status in (("good", "fail"), ("low", "pass"))
    ]
    (project / ".firewall").mkdir()
    (project / ".firewall" / "history.jsonl").write_text(
        "".join(row.to_json() + "\n" for row in rows)
    )
    event = project / "event.json"
    event.write_text(
        json.dumps({"pull_request": {"number": number}, "repository": {"default_branch": "main"}})
    )
    for name, value in {
        **env_of(hub),
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REF": f"refs/pull/{number}/merge",
        "GITHUB_HEAD_REF": "refunds",
        "GITHUB_WORKSPACE": str(project),
        "GITHUB_STEP_SUMMARY": str(project / "summary.md"),
        "GITHUB_OUTPUT": str(project / "output.txt"),
    }.items():
        monkeypatch.setenv(name, value)
    return number


def firewall_warnings(output: str) -> list[str]:
    return [line for line in output.splitlines() if "::warning title=Flakiness Firewall::" in line]


def test_a_pull_request_job_keeps_one_comment_with_what_changed(
    job: int, hub: GitHubStandIn
) -> None:
    first = CliRunner().invoke(main, ["run"], catch_exceptions=False)
    second = CliRunner().invoke(main, ["run"], catch_exceptions=False)

    assert first.exit_code == second.exit_code == 1, first.output
    [body] = hub.comments_on(job)
    assert body.startswith(MARKER)
    assert "- ❌ `low` FAIL (PASS on `main`): " in body
    assert "- ✅ `good` (FAIL on `main`)" in body, "this pull request's own rows never count"
    assert RUN_PAGE in body
    assert len(hub.calls("POST", r"/comments$")) == 1 and firewall_warnings(second.output) == []


def test_comment_false_turns_it_off(job: int, hub: GitHubStandIn, project: Path) -> None:
    config = project / "firewall.toml"
    config.write_text(config.read_text() + "[github]\ncomment = false\n")

    result = CliRunner().invoke(main, ["run"], catch_exceptions=False)

    assert result.exit_code == 1
    assert hub.comments_on(job) == [] and hub.calls(path=r"/comments") == []


def test_a_read_only_token_changes_no_exit_code(
    job: int, hub: GitHubStandIn, project: Path
) -> None:
    hub.fail("read-only", method="POST")

    result = CliRunner().invoke(main, ["run"], catch_exceptions=False)

    assert result.exit_code == 1
    [warning] = firewall_warnings(result.output)
    assert f"GitHub refused to comment on pull request #{job}: 403 Resource not" in warning
    assert "::error title=FAIL low" in result.output
    assert re.search(r"^exit-code<<(\S+)\n1\n\1$", (project / "output.txt").read_text(), re.M)


@pytest.mark.parametrize("flag", ["--dry-run", "--no-issues"])
def test_a_dry_run_or_no_issues_says_what_it_would_post(
    job: int, hub: GitHubStandIn, flag: str
) -> None:
    result = CliRunner().invoke(main, ["run", flag], catch_exceptions=False)

    assert result.exit_code == 1
    assert (
        f"would comment on pull request #{job}, or edit the firewall's comment: FAIL; against "
        "main: 1 newly failing, 0 newly quarantined, 1 fixed"
    ) in result.output
    assert hub.calls(path=r"/comments") == []


def test_a_push_to_main_comments_on_nothing(
    job: int, hub: GitHubStandIn, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_EVENT_NAME", "push")
    monkeypatch.setenv("GITHUB_REF", "refs/heads/main")
    monkeypatch.delenv("GITHUB_HEAD_REF")
    (project / "event.json").write_text(json.dumps({"repository": {"default_branch": "main"}}))

    CliRunner().invoke(main, ["run"], catch_exceptions=False)

    assert hub.calls(path=r"/comments") == []
