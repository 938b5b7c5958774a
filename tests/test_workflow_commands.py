"""No byte the firewall prints is a workflow command unless its own emitter wrote it.

Every command and output format runs in a GitHub job against a corpus of
forgeries, and the port of the runner's parser (``actions_parser``) says which
commands the job would act on: exactly the annotations ``output.annotate``
printed, all of them on stderr, none lost to a forged ``stop-commands``;
stdout holds no command, and a document on it reads back exactly.
"""

from __future__ import annotations

import datetime as dt
import html.parser
import json
import os
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from actions_parser import (
    Command,
    Runner,
    StopTokenRefused,
    commands,
    lines,
    parse_legacy,
    parse_v2,
    split_pair,
)
from builders import error_trial, make_artefact, make_report, trial
from click.testing import CliRunner, Result

from firewall import output
from firewall.cli import main
from firewall.lifecycle import Entry
from firewall.policy import Status
from firewall.store.registry import Registry
from firewall.text import printable

ESCAPED = "%0A::error::forged escape"
"""No command printed raw: one only if an annotation's data were unescaped twice."""

CORPUS = [
    "::error::forged",
    "::warning file=evil.py,line=1::forged",
    "::notice title=forged::forged",
    "::ERROR::forged in capitals",
    "  ::error::forged after spaces",
    "\t::error::forged after a tab",
    "\u00a0::error::forged after a no-break space",
    "\u3000::error::forged after an ideographic space",
    "\u2028::error::forged after a line separator",
    "\x85::error::forged after a next line",
    "\x0b\x0c::error::forged after a vertical tab and a form feed",
    "::add-mask::forged-secret",
    "::set-output name=status::forged",
    "::set-env name=PATH::/forged",
    "::add-path::/forged",
    "::save-state name=x::forged",
    "::debug::forged",
    "::echo::on",
    "::group::forged",
    "::endgroup::",
    "::add-matcher::forged.json",
    "::remove-matcher owner=forged::",
    "::stop-commands::forgedtoken",
    "##[error]forged",
    "text before ##[error]forged",
    "##[add-mask]forged",
    "##[set-output name=x;]forged",
    "##[warning file=evil.py;line=1]forged",
    "##[stop-commands]forgedtoken",
    "###[error]forged after a third hash",
    "##[group]forged##[endgroup]",
    ESCAPED,
    "line\r::error::forged after a carriage return",
    "line\r\n::error::forged after CRLF",
    "\n\n::notice::forged after blank lines",
]
HOSTILE = "\n".join(CORPUS)
ONE_LINE = [line for line in CORPUS if not re.search(r"[\x00-\x1f\x7f]", line)]
"""Every forgery at the start of a line and, where it has a prefix, in the middle of one."""


@pytest.mark.parametrize("payload", [p for p in CORPUS if p != ESCAPED])
def test_every_forgery_is_a_command_when_printed_raw(payload: str) -> None:
    assert commands(payload), "the corpus is worth its name"


# --- the port, pinned on what the runner does


def names(output_text: str) -> list[str]:
    return [command.name for command in commands(output_text)]


@pytest.mark.parametrize(
    ("line", "name"),
    [
        ("::error::x", "error"),
        ("   ::warning::x", "warning"),  # TrimStart before the '::' test
        ("\u00a0\u2003::notice::x", "notice"),  # .NET white space is Unicode's
        ("::ERROR::x", "ERROR"),  # registered names compare without case
        ("x ::error::y", None),  # '::' only at a line's start
        ("\u2060::error::y", None),  # a word joiner is no white space
        ("\x1c::error::y", None),  # nor an information separator (Python's isspace says yes)
        ("::made-up::x", None),  # only registered commands
        ("::error", None),  # no second '::'
        ("##[error]x", "error"),
        ("text ##[add-mask]WORD", "add-mask"),  # legacy: anywhere in the line
        ("#\u2060#[error]x", None),
        ("##[error", None),  # no ']'
        ("::internal-set-repo-path::x", None),  # the runner's plugins only
    ],
)
def test_which_lines_are_commands(line: str, name: str | None) -> None:
    assert names(line) == ([name] if name else [])


def test_lines_are_cut_at_cr_lf_and_crlf_only() -> None:
    assert lines("a\rb\nc\r\nd\u2028e\x85f\n") == ["a", "b", "c", "d\u2028e\x85f"]
    assert names("x\r::error::a\n::warning::b\r\n::notice::c") == ["error", "warning", "notice"]


def test_the_v2_form_unescapes_properties_and_data() -> None:
    [command] = commands("::error  title=a%3Ab%2Cc%0Ad,,file=x.py ,line=3 ::m%25%0A%0Dn")
    # The list is trimmed, and empty items skipped; an item keeps its own spaces.
    assert command.properties == {"title": "a:b,c\nd", "file": "x.py ", "line": "3"}
    assert command.data == "m%\n\rn"
    # One mapping after another, as the runner replaces them: %25 last.
    assert parse_v2("::error::%250A", {"ERROR"}) == Command("error", {}, "%0A", "::error::%250A")


def test_the_legacy_form_unescapes_its_own_set() -> None:
    command = parse_legacy("log: ##[set-output name=a%3Bb%5D;x=1]v%3B", {"SET-OUTPUT"})
    assert command == Command(
        "set-output", {"name": "a;b]", "x": "1"}, "v;", "log: ##[set-output name=a%3Bb%5D;x=1]v%3B"
    )


def test_a_property_splits_at_its_first_equals_sign() -> None:
    assert split_pair("a=b=c") == ["a", "b=c"]
    assert split_pair("=a=b") == ["a", "b"]  # the empty piece before the key is dropped
    assert split_pair("a==b") == ["a", "=b"]
    assert split_pair("a=") == ["a"] and split_pair("") == []


def test_stop_commands_pauses_until_its_token_in_either_form() -> None:
    text = "::stop-commands::tok\n::error::no\n##[warning]no\n::TOK::\n::error::yes"
    assert names(text) == ["stop-commands", "TOK", "error"]
    text = "##[stop-commands]tok\n::error::no\nresume here ##[tok]\n##[error]yes"
    assert names(text) == ["stop-commands", "tok", "error"]


def test_stop_commands_state_spans_both_streams() -> None:
    runner = Runner()
    runner.read("::stop-commands::tok\n")  # stdout
    assert runner.read("::error::swallowed\n") == []  # stderr, read while stopped
    runner.read("::tok::\n")
    assert [c.name for c in runner.read("::error::seen\n")] == ["error"]


@pytest.mark.parametrize("token", ["", "error", "Set-Output", "pause-logging"])
def test_a_stop_token_that_is_a_command_is_refused(token: str) -> None:
    with pytest.raises(StopTokenRefused):
        commands(f"::stop-commands::{token}")


# --- the neutralisers, on the corpus


@pytest.mark.parametrize("payload", CORPUS)
def test_inert_text_is_no_command_and_looks_the_same(payload: str) -> None:
    shown = output.inert(payload)
    assert commands(shown) == []
    assert commands("firewall says: " + shown) == []
    assert shown.replace(output.WORD_JOINER, "") == payload
    assert output.inert(shown) == shown


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_inert_json_reads_back_exactly(ensure_ascii: bool) -> None:
    document = {"corpus": CORPUS, HOSTILE: {"nested": [HOSTILE, "\\##[error]x"]}}
    for indent in (None, 2):
        text = output.inert_json(json.dumps(document, indent=indent, ensure_ascii=ensure_ascii))
        assert json.loads(text) == document
        assert commands(text) == []
        assert output.inert(text) == text, "the sink has nothing left to do"
    assert output.inert_json('"##[x"') == '"\\u0023#[x"'


def test_inert_markup_reads_back_exactly_in_text_and_attributes() -> None:
    legal = printable(HOSTILE)  # what XML 1.0 cannot carry removed, as the renderers do
    root = ET.Element("testsuite", name=legal)
    case = ET.SubElement(root, "failure", message=legal)
    case.text = legal
    ET.indent(root)
    text = output.inert_markup(ET.tostring(root, encoding="unicode"))
    assert commands(text) == []
    assert output.inert(text) == text
    parsed = ET.fromstring(text)
    # XML reads CR and CRLF in text as LF; attributes keep theirs (&#10;, &#13;).
    assert parsed.get("name") == legal
    assert parsed[0].get("message") == legal
    assert parsed[0].text == lf(legal)

    page = output.inert_markup(f'<p title="{HOSTILE}">\n{HOSTILE}\n</p>')
    assert commands(page) == []
    seen = Attributes()
    seen.feed(page)
    assert seen.found == [("title", HOSTILE)] and seen.text == f"\n{HOSTILE}\n"


def lf(text: str) -> str:
    """``text`` with CR and CRLF read as LF, as XML and HTML parsers read text."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


class Attributes(html.parser.HTMLParser):
    """What a browser reads: attribute values and text, character references resolved."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, str | None]] = []
        self.text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found += attrs

    def handle_data(self, data: str) -> None:
        self.text += data


# --- the sink


@pytest.mark.parametrize(
    "say",
    [output.echo, output.note, output.warn, output.error, output.echo_json],
    ids=["echo", "note", "warn", "error", "echo_json"],
)
def test_nothing_the_sink_prints_is_a_command(
    say: Callable[[str], None], capsys: pytest.CaptureFixture[str]
) -> None:
    say(json.dumps(HOSTILE) if say is output.echo_json else HOSTILE)
    printed = capsys.readouterr()
    assert commands(printed.out) == [] and commands(printed.err) == []


def test_progress_shows_no_command(capsys: pytest.CaptureFixture[str]) -> None:
    counter = output.TrialCounter(enabled=True)
    counter.start(1)
    counter.step("x ##[error]forged", errored=False)
    counter.finish()
    assert commands(capsys.readouterr().err) == []


def test_annotations_are_the_only_commands_and_go_to_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    output.annotate(["::error title=t::m", "::warning::w"])
    printed = capsys.readouterr()
    assert printed.out == ""
    assert names(printed.err) == ["error", "warning"]
    with pytest.raises(ValueError, match="not one workflow command line"):
        output.annotate(["::error::a\n::error::b"])
    with pytest.raises(ValueError, match="not one workflow command line"):
        output.annotate(["plain text"])


# --- every command and format, in a GitHub job

FORGE = """\
import json
import sys

HOSTILE = json.load(open("payloads.json"))


def raise_it(seed):
    raise RuntimeError(HOSTILE)


if __name__ == "__main__":
    mode, trial = sys.argv[1], int(sys.argv[2])
    if mode == "stderr":
        sys.stderr.write(HOSTILE)
        sys.exit(5)
    if mode == "error":
        print(json.dumps({"error": HOSTILE}))
    if mode == "violation":
        print(json.dumps({"score": 1.0, "violations": [HOSTILE]}))
    if mode == "drift":
        print(json.dumps({
            "score": [0.1, 0.9, 0.5][trial % 3],
            "fields": {"answer": HOSTILE + str(trial)},
            "items": {HOSTILE: trial % 2},
            "model_id": HOSTILE,
            "prompt_version": HOSTILE,
        }))
"""
MODES = {"stderr-forger": "stderr", "error-field": "error", "violator": "violation"}
SINCE = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def toml(value: str) -> str:
    return json.dumps(value)  # a JSON string of ASCII and escapes is a TOML basic string


def write_project(root: Path) -> None:
    """Evals that print the corpus every way an eval can, a config that carries it too."""
    (root / "payloads.json").write_text(json.dumps(HOSTILE))
    (root / "forge.py").write_text(FORGE)
    python = shlex.quote(sys.executable)
    config = "k = 3\nadaptive = false\nseed = 1\n"
    for eval_id, mode in [*MODES.items(), ("drifter", "drift")]:
        command = f"{python} forge.py {mode} {{trial}}"
        config += f'[[evals]]\nid = "{eval_id}"\ncommand = {toml(command)}\n'
        # A tag is one line of printable text (the config refuses others): each such forgery.
        config += f"tags = [{', '.join(toml(line) for line in ONE_LINE)}]\n"
    config += '[[evals]]\nid = "raiser"\npython = "forge:raise_it"\n'
    (root / "firewall.toml").write_text(config)


def write_registry(root: Path) -> None:
    """The corpus in reasons of the registry, for status, nightly and quarantine list."""
    with Registry(root / "quarantine.json").edit() as entries:
        for eval_id, issue in (("drifter", 7), ("violator", 8), ("gone", 9)):
            entries[eval_id] = Entry(
                since=SINCE,
                source="manual",
                reason=HOSTILE,
                issue=issue,
                review_by=SINCE,  # overdue: one more line of eval text in status
            )


def write_history(root: Path) -> None:
    """Rows under ids no config has: calibrate and status show what the history says."""
    rows = [
        {
            "eval_id": eval_id,
            "run_id": f"run-{i}",
            "mode": "run",
            "status": "pass",
            "k": 5,
            "build_ts": f"2026-01-{i + 1:02d}T00:00:00Z",
            "median": 0.9,
            "iqr": 0.01 * (i % 4),
            "n": 5,
            "drift": {HOSTILE: 0.5},
            "model_ids": [HOSTILE],
            "prompt_versions": [HOSTILE],
            "git_ref": HOSTILE,
        }
        for i in range(12)
        for eval_id in ("drifter", HOSTILE)
    ]
    path = root / ".firewall" / "history.jsonl"
    path.parent.mkdir(exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def write_artefact(root: Path) -> Path:
    """A saved artefact with the corpus in every text field a report shows."""
    hostile_trials = [error_trial(HOSTILE, index=0), trial(0.1, index=1, violations=[HOSTILE])]
    reports = [
        make_report("errored", Status.ERROR, reason=HOSTILE, trials=hostile_trials),
        make_report("failed", Status.FAIL, reason=HOSTILE, trials=hostile_trials),
        make_report("new", Status.QUARANTINE, reason=HOSTILE, blocking=False),
        make_report("soft", Status.FAIL, reason=HOSTILE, blocking=False),
    ]
    path = root / "saved.json"
    path.write_text(make_artefact(*reports, git_ref=HOSTILE).to_json())
    return path


@pytest.fixture
def job(project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project in a GitHub job, with the corpus in every file the firewall reads."""
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(project))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(project / "summary.md"))
    monkeypatch.setenv("GITHUB_OUTPUT", str(project / "outputs.txt"))
    write_project(project)
    write_history(project)
    return project


@pytest.fixture
def emitted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every line the firewall's own emitter printed, in order."""
    lines: list[str] = []
    annotate = output.annotate

    def spy(batch: list[str]) -> None:
        lines.extend(batch)
        annotate(batch)

    monkeypatch.setattr(output, "annotate", spy)
    yield lines


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def assert_only_own_commands(result: Result, emitted: list[str]) -> None:
    """The job acts on exactly the firewall's annotations, read from stderr, and nothing
    on stdout: whichever way a runner interleaves the two streams, it acts on the same."""
    assert [c.line for c in commands(result.output)] == emitted, result.output
    assert [c.line for c in commands(result.stderr)] == emitted
    assert commands(result.stdout) == []


@pytest.mark.parametrize(
    ("args", "document", "setup"),
    [
        (["run"], None, ""),
        (["run", "-v"], None, ""),
        (["run", "--format", "json"], "json", ""),
        (["run", "--dry-run", "-v"], None, ""),
        (["run", "--include-quarantined", "--no-issues"], None, "registry"),
        (["nightly", "--dry-run"], None, "registry"),
        (["nightly", "--format", "json", "--dry-run"], "json", "registry"),
        (["list"], None, ""),
        (["list", "--format", "json"], "json", ""),
        (["status"], None, "registry"),
        (["status", "--json"], "json", "registry"),
        (["quarantine", "list"], None, "registry"),
        (["calibrate"], None, ""),
        (["calibrate", "--json"], "json", ""),
        (["replay", "drifter", "--seed", "1"], None, ""),
        (["replay", "error-field", "--seed", "1"], None, ""),
        (["report", "saved.json"], None, "artefact"),
        (["report", "saved.json", "--junit"], "xml", "artefact"),
        (["report", "saved.json", "--html"], "html", "artefact"),
        (["schema"], "json", ""),
        (["history", "compact", "--keep-days", "1"], None, ""),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else None,
)
def test_no_command_or_format_prints_a_forged_command(
    job: Path, emitted: list[str], args: list[str], document: str | None, setup: str
) -> None:
    if setup == "registry":
        write_registry(job)
    if setup == "artefact":
        write_artefact(job)
    result = invoke(*args)
    assert result.exit_code in (0, 1, 3), result.output
    assert_only_own_commands(result, emitted)
    assert "forged" in result.output or args[0] in ("schema", "history"), "eval text is shown"
    if document == "json":
        parsed = json.loads(result.stdout)  # the whole of stdout: annotations are on stderr
        assert args[0] == "schema" or any("##[error]forged" in text for text in strings(parsed))
    if document == "xml":
        ET.fromstring(result.stdout)
    if document == "html":
        page = Attributes()
        page.feed(result.stdout)
        assert lf(printable(HOSTILE)) in page.text, "a browser shows the eval text exactly"


def strings(value: object) -> Iterator[str]:
    """Every string in a parsed JSON document, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def test_a_run_annotates_every_eval_despite_the_forgeries(job: Path, emitted: list[str]) -> None:
    """A forged ``stop-commands`` would swallow what follows: every annotation is acted on."""
    result = invoke("run")
    titles = {c.properties.get("title") for c in commands(result.output)}
    assert {"ERROR stderr-forger", "ERROR error-field", "ERROR raiser", "FAIL violator"} <= titles
    assert "QUARANTINE drifter" in titles


def test_the_json_document_holds_the_eval_text_exactly(job: Path, emitted: list[str]) -> None:
    result = invoke("run", "--format", "json")
    document = json.loads(result.stdout)
    on_disk = json.loads((job / "firewall-report.json").read_text())
    assert document == on_disk, "the printed document is the artefact, read back exactly"
    [violator] = [e for e in document["evals"] if e["id"] == "violator"]
    assert violator["trials"][0]["violations"] == [HOSTILE]
    [errored] = [e for e in document["evals"] if e["id"] == "error-field"]
    assert HOSTILE in errored["trials"][0]["error"]
    assert "\\u0023#[" in result.stdout and "##[" not in result.stdout


@pytest.mark.parametrize("flag", ["--markdown", "--junit", "--html"])
def test_a_rendering_is_the_same_on_stdout_and_in_its_file(job: Path, flag: str) -> None:
    saved = write_artefact(job)
    printed = invoke("report", str(saved), flag)
    invoke("report", str(saved), flag, "--out", "rendered")
    assert (job / "rendered").read_text() == printed.stdout
    assert commands(printed.stdout) == []


def test_the_junit_report_reads_back_the_eval_text(job: Path) -> None:
    printed = invoke("report", str(write_artefact(job)), "--junit")
    suite = ET.fromstring(printed.stdout).find("testsuite")
    assert suite is not None
    failure = suite.find("testcase[@name='failed']/failure")
    assert failure is not None and failure.get("message") == printable(HOSTILE)
    git_ref = suite.find("properties/property[@name='git_ref']")
    assert git_ref is not None and git_ref.get("value") == printable(HOSTILE)
    assert "&#35;#[" in printed.stdout and "##[" not in printed.stdout


def test_a_probe_part_and_its_gate(job: Path, emitted: list[str]) -> None:
    probed = invoke("probe", "--out", "part.json")
    assert_only_own_commands(probed, emitted)
    for args in (["gate", "part.json"], ["gate", "part.json", "--format", "json"]):
        emitted.clear()
        gated = invoke(*args)
        assert gated.exit_code == 1
        assert_only_own_commands(gated, emitted)
    json.loads(gated.stdout)


@pytest.mark.parametrize(
    "args",
    [
        ["quarantine", "add", "raiser", "--reason", HOSTILE, "--no-issues"],
        ["quarantine", "release", "drifter", "--reason", HOSTILE, "--no-issues"],
        ["quarantine", "release", "violator", "--reason", HOSTILE],
    ],
    ids=["add", "release", "release with issues on"],
)
def test_a_reason_given_as_an_argument_is_shown_as_text(
    job: Path, emitted: list[str], args: list[str]
) -> None:
    write_registry(job)
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert_only_own_commands(result, emitted)
    shown = invoke("quarantine", "list") if args[1] == "add" else result  # add says no reason
    assert "forged" in shown.output
    assert_only_own_commands(shown, emitted)


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--shard", HOSTILE],
        ["run", "--k", HOSTILE],
        ["run", HOSTILE],  # an eval id that is no eval
        ["replay", HOSTILE, "--seed", "1"],
        ["quarantine", "release", HOSTILE],
        ["report", HOSTILE],
        # click cuts an option at its first '=' and shows the rest as repr() would
        ["run", "--##[error]forged"],  # an unknown option of a command
        ["--##[error]forged"],  # an unknown option before any command
        [HOSTILE],  # an unknown command
    ],
    ids=[
        "shard",
        "k",
        "id",
        "replay",
        "release",
        "report",
        "command option",
        "main option",
        "command",
    ],
)
def test_an_argument_in_an_error_message_is_no_command(
    job: Path, emitted: list[str], args: list[str]
) -> None:
    result = invoke(*args)
    assert result.exit_code in (2, 5), result.output
    assert "forged" in result.output
    assert_only_own_commands(result, emitted)


def test_a_config_error_quoting_the_config_is_no_command(job: Path, emitted: list[str]) -> None:
    (job / "firewall.toml").write_text(f"{toml(HOSTILE)} = 1\n")
    result = invoke("run")
    assert result.exit_code == 2 and "forged" in result.output
    assert_only_own_commands(result, emitted)


def test_a_decorated_module_that_fails_to_import_is_no_command(
    job: Path, emitted: list[str]
) -> None:
    (job / "evals").mkdir()
    (job / "evals" / "broken.py").write_text(f"raise RuntimeError({HOSTILE!r})\n")
    (job / "firewall.toml").write_text('paths = ["evals"]\n')
    result = invoke("list")
    assert result.exit_code == 2 and "forged" in result.output
    assert_only_own_commands(result, emitted)


def test_an_internal_error_and_its_traceback_are_no_command(
    job: Path, emitted: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from firewall.pipeline import context

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError(HOSTILE)

    monkeypatch.setattr(context, "load", broken)
    result = invoke("status")
    assert result.exit_code == 4 and "Traceback" in result.output and "forged" in result.output
    assert_only_own_commands(result, emitted)


def test_init_says_what_it_wrote(job: Path, emitted: list[str]) -> None:
    result = invoke("init", "--action", HOSTILE)
    assert result.exit_code == 0
    assert_only_own_commands(result, emitted)


@pytest.mark.parametrize("payload", CORPUS)
def test_an_annotation_gives_the_runner_the_reason_back(payload: str) -> None:
    """The toolkit's escaping, read by the runner's unescaping: one command, the reason whole."""
    from firewall.github.actions.annotations import annotations_for

    run = make_artefact(make_report("forged", Status.FAIL, reason=payload))
    [line] = annotations_for(run)
    [command] = commands(line)
    assert command.name == "error" and command.properties["title"] == "FAIL forged"
    assert command.data == payload.translate({0x0B: " ", 0x0C: " ", 0x85: " ", 0x2028: " "})


@pytest.mark.e2e
def test_the_installed_command_in_a_job(job: Path) -> None:
    """End to end: the streams of the real process, as the runner reads them."""
    firewall = Path(sys.executable).with_name("firewall")
    env = {
        **os.environ,
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(job),
        "GITHUB_STEP_SUMMARY": str(job / "summary.md"),
        "GITHUB_OUTPUT": str(job / "outputs.txt"),
    }
    done = subprocess.run(
        [str(firewall), "run", "--format", "json"],
        cwd=job,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["summary"]["exit_code"] == 1
    assert commands(done.stdout) == []
    acted = commands(done.stderr)
    assert {c.name for c in acted} <= {"error", "warning", "notice"}
    # The firewall's own warnings too (this job has no git remote and no token, and says so).
    titles = {c.properties.get("title", "") for c in acted} - {"Flakiness Firewall"}
    assert titles == {
        "ERROR stderr-forger",
        "ERROR error-field",
        "ERROR raiser",
        "FAIL violator",
        "QUARANTINE drifter",
    }, done.stderr
