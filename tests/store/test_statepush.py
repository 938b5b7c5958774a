"""The state branch's blobs, written by the firewall itself: git's own objects, byte for byte.

A push writes recent.jsonl (fifteen megabytes at 5,000 evals) as a loose object
without `git hash-object`, whose collision-detecting SHA-1 cost more CPU than the
rest of the write. Git must not be able to tell: the id is the one git computes,
the object reads back as the text, `git fsck` finds nothing wrong, and a push
carries it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from gitrepos import GIT_ENV, git

from firewall.store.git import Git, StateError
from firewall.store.statepush import _CHUNK, write_blob

TEXTS = {
    "empty": "",
    "ascii": '{"schema_version":1}\n{"eval_id":"a","median":[0.8]}\n',
    "non-ascii": "é" * (_CHUNK - 1) + "\u2603 a snowman across a chunk's edge\n",
    "chunks": "x" * (2 * _CHUNK + 17),
}


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, value in GIT_ENV.items():
        monkeypatch.setenv(name, value)
    git(tmp_path, "init", "--quiet", "repo")
    return tmp_path / "repo"


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_a_blob_is_the_object_git_would_write(repo: Path, name: str) -> None:
    text = TEXTS[name]
    blob = write_blob(Git(repo), text)
    assert blob == _git_id(repo, text)
    shown = subprocess.run(
        ["git", "cat-file", "blob", blob], cwd=repo, capture_output=True, check=True
    )
    assert shown.stdout.decode() == text
    assert git(repo, "fsck", "--strict", "--no-dangling") == ""
    assert not [p for p in (repo / ".git" / "objects").iterdir() if p.name.startswith("tmp_")]


def test_a_lone_surrogate_is_written_as_a_question_mark_and_the_blob_is_utf8(repo: Path) -> None:
    blob = write_blob(Git(repo), "model \udc80 id\n")
    shown = subprocess.run(["git", "cat-file", "blob", blob], cwd=repo, capture_output=True)
    assert shown.stdout == b"model ? id\n"
    assert blob == _git_id(repo, "model ? id\n")


def test_writing_a_blob_git_already_holds_keeps_one_copy(repo: Path) -> None:
    first = write_blob(Git(repo), TEXTS["ascii"])
    assert write_blob(Git(repo), TEXTS["ascii"]) == first
    assert git(repo, "count-objects") == "1 objects, 4 kilobytes"


def test_a_blob_of_a_worktree_goes_to_the_repository_it_shares(repo: Path) -> None:
    git(repo, "commit", "--quiet", "--allow-empty", "-m", "first")
    git(repo, "worktree", "add", "--quiet", "../linked")
    blob = write_blob(Git(repo.parent / "linked"), TEXTS["ascii"])
    assert git(repo, "cat-file", "-t", blob) == "blob"
    assert not (repo.parent / "linked" / "objects").exists()


def test_an_object_it_cannot_write_is_a_state_error_naming_where_and_leaves_nothing(
    repo: Path,
) -> None:
    text = TEXTS["ascii"]
    blob = _git_id(repo, text)
    objects = repo / ".git" / "objects"
    (objects / blob[:2]).write_text("a file where git keeps a directory")
    with pytest.raises(StateError) as raised:
        write_blob(Git(repo), text)
    assert f"could not write a git object in {objects}: File exists" in str(raised.value)
    assert "fix the path, or move what is in the way" in str(raised.value)
    assert sorted(p.name for p in objects.iterdir()) == sorted(["info", "pack", blob[:2]])


def _git_id(repo: Path, text: str) -> str:
    done = subprocess.run(
        ["git", "hash-object", "--stdin"], cwd=repo, input=text.encode(), capture_output=True
    )
    return done.stdout.decode().strip()
