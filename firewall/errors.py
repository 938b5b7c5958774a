"""The exit codes, and the errors a user is meant to read.

Every error the firewall expects to meet in the wild is a ``FirewallError``:
the command-line boundary prints its message on one line and exits with its
``exit_code``. Anything else is a bug of the firewall (or an OS failure it did
not foresee): the boundary prints one line, the traceback, and exits 4, so that
CI never reads a crash of the tool as a failing eval.

    FirewallError                 exit 2 unless stated
    ├── ConfigError               bad firewall.toml / [tool.firewall] / decorator options
    ├── DiscoveryError            an eval module that cannot be imported or scanned
    ├── RegistryError             quarantine.json that cannot be read or written
    ├── ArtefactError             a report or probe part that cannot be read
    ├── WriteError                a file that cannot be written (a full disk, a read-only
    │                             directory); also an OSError, the one it explains
    ├── HistoryWriteError         the history file cannot be appended to (a full disk)
    ├── HistoryReadError          the history file cannot be read (a FIFO, a directory,
    │                             no permission); a line that is no row is only skipped
    ├── LockError                 a file another firewall process holds too long, or
    │                             whose lock file cannot be made
    ├── GitError                  git could not fetch, commit or push a branch of the
    │                             firewall's own (the rolling proposal)
    ├── ProposalRefused           GitHub would not open the proposal's pull request (a
    │                             repository setting or the token's permissions)
    ├── IssueError                GitHub unreachable or refusing; never leaves the pipeline
    │   │                         (the two below cost one eval only, the sync goes on)
    │   ├── IssueGone             an eval's issue deleted, moved, not found, unmarked
    │   ├── IssueRefused          a change to one issue refused (locked, 422)
    │   ├── PullRequestNotPermitted   Actions may not open pull requests here
    │   └── BudgetSpent           the run's time for GitHub ran out (github/budget.py)
    └── UsageError                a command line that cannot be honoured
        └── NothingSelected       no eval selected: exit 5, never a silent green
"""

from __future__ import annotations

import enum
from pathlib import Path


class ExitCode(enum.IntEnum):
    """What a command's exit status means (contract §5)."""

    OK = 0  # nothing blocking failed; quarantines are not failures
    FAIL = 1  # at least one blocking eval failed
    USAGE = 2  # usage or configuration error
    ERROR = 3  # at least one blocking eval errored, and none failed
    INTERNAL = 4  # a bug or an unforeseen OS error of the firewall itself
    NOTHING_SELECTED = 5  # no eval was selected
    INTERRUPTED = 130

    @property
    def result(self) -> str:
        """The run's overall result as the ``status`` step output gives it."""
        if self is ExitCode.OK or self is ExitCode.NOTHING_SELECTED:
            return "pass"
        return "fail" if self is ExitCode.FAIL else "error"


class FirewallError(Exception):
    """An expected failure, explained in one line that says what to do."""

    exit_code = ExitCode.USAGE


class ConfigError(FirewallError):
    """The configuration names an unknown key, a wrong type or an impossible value."""


class DiscoveryError(FirewallError):
    """Decorated evals could not be discovered."""


class RegistryError(FirewallError):
    """The quarantine registry is unreadable, of an unknown version, or locked."""


class ArtefactError(FirewallError):
    """A report or probe part is missing or malformed."""


class WriteError(FirewallError, OSError):
    """A file the firewall writes could not be written; the message names it and says what
    to do. It is the ``OSError`` it explains too, so that code that copes with the OS's
    errors (a job summary that cannot be written is a warning) copes with it unchanged."""

    def __init__(self, message: str, *, path: Path) -> None:
        super().__init__(message)
        self.path = path


class HistoryWriteError(WriteError):
    """A run's rows could not be appended to the history file, which names ``path``."""


class HistoryReadError(FirewallError):
    """The history file cannot be read at all; the message names it and says why."""


class LockError(FirewallError):
    """Another process held a file's lock past the timeout, or its lock file cannot be made."""


class GitError(FirewallError):
    """A git command on one of the firewall's branches failed; the message names the command
    and git's own last word."""


class ProposalRefused(FirewallError):
    """GitHub would not open the proposal's pull request; the message says what to change.

    A configuration error (exit 2), never a failing eval (1): the repository does not
    let Actions open pull requests, or the token lacks ``pull-requests: write``.
    """


class IssueError(FirewallError):
    """GitHub could not be reached or refused; the gate's decision stands, the next run retries."""


class IssueGone(IssueError):
    """An eval's issue is no longer its issue in this repository; the registry drops its number.

    Deleted (410), transferred (301 to another repository), not found (404), or
    its marker edited away. Costs only that eval: the sync goes on with the next
    one, and the eval's issue is found again by its marker or opened anew.
    """

    def __init__(self, message: str, *, eval_id: str, number: int | None) -> None:
        super().__init__(message)
        self.eval_id, self.number = eval_id, number


class IssueRefused(IssueError):
    """GitHub refused one change to one eval's issue (locked, 422); the issue itself stands."""

    def __init__(self, message: str, *, eval_id: str, number: int | None) -> None:
        super().__init__(message)
        self.eval_id, self.number = eval_id, number


class PullRequestNotPermitted(IssueError):
    """The repository or organisation does not let GitHub Actions open pull requests."""


class UsageError(FirewallError):
    """The command line asks for something that cannot be done."""


class NothingSelected(UsageError):
    """No eval was selected (a tag or an id that matches nothing, `paths` that find none):
    a gate that ran nothing must not read as one that passed."""

    exit_code = ExitCode.NOTHING_SELECTED
