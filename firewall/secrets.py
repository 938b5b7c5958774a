"""Secret values, and taking them out of everything the firewall posts or writes.

An eval may print anything in its environment: ``$GITHUB_TOKEN``, or an SDK's
error that quotes its API key. What it printed reaches the pull request's
comment, the issues, the job summary and the JSON report, and GitHub's runner
masks secrets in the job's log only: a comment is public the moment it is
posted. ``Secrets`` is built once from the environment (``from_env``), and
every boundary where text leaves the firewall passes through it: ``scrub``
for text, ``scrub_data`` for JSON-like data, ``scrub_model`` for a pydantic
value. Each secret value becomes ``***``. Pure: no I/O, no ``os.environ``.

**Which values.** ``GITHUB_TOKEN``'s, the action's token input's
(``INPUT_GITHUB-TOKEN``, ``INPUT_GITHUB_TOKEN``), and those of variables
whose name looks like a secret's (``secret_name``): it contains, in any case,
``TOKEN``, ``KEY``, ``SECRET``, ``PASSWORD``, ``PASSWD`` or ``CREDENTIAL``, or
has ``AUTH``, ``PAT``, ``PASS`` or ``PWD`` as a whole word between ``_``, ``-``
or ``.``. Only as a word: ``AUTH`` inside ``GIT_AUTHOR_NAME`` or
``XAUTHORITY``, ``PAT`` inside ``PATH`` and ``PASS`` inside ``BYPASS`` name no
secret; and ``PWD`` the variable is the working directory (``MYSQL_PWD`` is a
password). ``SSH_AUTH_SOCK`` does match: a socket's path, harmless to hide.

**Which values are not.** A value shorter than ``MIN_LENGTH`` (6) characters,
a word that switches something (``true``, ``disabled``: ``NOT_SECRET``), or a
plain number shorter than 16 characters is no secret: hiding it would put
``***`` into every seed, count and sentence that happens to contain it
(``TOKENIZERS_PARALLELISM=false``, ``KEY_SIZE=2048``). Leading and trailing
blanks are not part of a secret (a token read from a file keeps its newline);
each line of a value of several lines is a secret of its own (a PEM key's lines
are shown one at a time), under the same rules.

**Which forms.** Each value, and the forms the firewall's own output could
give it: escaped as a JSON string is (the text of a JSON document or marker
quotes ``"``, ``\\`` and non-ASCII characters that way) and percent-encoded
(an SDK's error quotes the URL it called, with ``api_key=...`` in the query).
Not base64: the firewall encodes nothing in it, and the base64 of a value
inside a longer text depends on where it starts, so it is not one string to
look for. The escaping and cutting that renderers do (Markdown, a reason cut
to a cell's width) cannot be undone here: a boundary scrubs the data before it
renders it, and the text after.

**How.** One pass of one regular expression, longest value first, so that a
secret that contains another goes whole; repeated until nothing matches, so
that ``***`` put between two parts can never make a value anew, and a second
scrub changes nothing. Without secrets each call returns its argument as it is.

**Keys too.** ``scrub_data`` scrubs the keys of mappings as well as values: an
eval's own fields may be keyed by anything. Two keys that differ only in a
secret become one, the later value kept: losing a field is better than
posting a key.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar, cast

from pydantic import BaseModel

__all__ = [
    "MIN_LENGTH",
    "NOT_SECRET",
    "REDACTED",
    "TOKEN_NAMES",
    "Secrets",
    "secret_name",
    "without_token",
]

REDACTED = "***"
MIN_LENGTH = 6
"""Characters a value needs to be taken for a secret."""

NOT_SECRET = frozenset(
    {"true", "false", "yes", "no", "on", "off", "none", "null", "nil", "undefined"}
    | {"enabled", "disabled", "enable", "disable", "default", "auto"}
)
"""Values (in any case) that switch something rather than unlock it."""

TOKEN_NAMES = ("GITHUB_TOKEN", "GH_TOKEN", "INPUT_GITHUB-TOKEN", "INPUT_GITHUB_TOKEN")
"""The firewall's own GitHub token, as Actions, the gh CLI and the action's input name it:
what an eval's environment does not inherit unless ``[github] share_token`` says so."""

_IN_NAME = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
_WORDS = frozenset({"AUTH", "PAT", "PASS", "PWD"})
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)")
_LONGEST_NUMBER = 15

Data = TypeVar("Data")
Model = TypeVar("Model", bound=BaseModel)


def secret_name(name: str) -> bool:
    """Whether an environment variable's name looks like a secret's (see the module)."""
    upper = name.upper()
    if upper == "PWD":  # the working directory
        return False
    if any(part in upper for part in _IN_NAME):
        return True
    return any(word in _WORDS for word in re.split(r"[_.-]", upper))


def without_token(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without the firewall's GitHub token (``TOKEN_NAMES``): an eval's environment."""
    return {name: value for name, value in env.items() if name not in TOKEN_NAMES}


class Secrets:
    """The secret values of one environment, and what takes them out of text and data."""

    __slots__ = ("_pattern", "forms", "values")

    def __init__(self, values: Iterable[str] = ()) -> None:
        """``values`` that pass the rules of the module (``from_env`` finds them)."""
        kept = {part for value in values for part in _parts(value)}
        self.values: tuple[str, ...] = tuple(sorted(kept, key=lambda v: (-len(v), v)))
        forms = {form for value in self.values for form in _forms(value)}
        # Every string `scrub` replaces, longest first: the alternation takes the first
        # that matches, so a value that contains another goes whole.
        self.forms: tuple[str, ...] = tuple(sorted(forms, key=lambda f: (-len(f), f)))
        self._pattern = re.compile("|".join(map(re.escape, self.forms))) if forms else None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Secrets:
        """The secrets of an environment: its GitHub token's and each secret-named variable's."""
        return cls(value for name, value in env.items() if name in TOKEN_NAMES or secret_name(name))

    def __bool__(self) -> bool:
        return self._pattern is not None

    def __repr__(self) -> str:  # never the values themselves
        return f"Secrets({len(self.values)} values)"

    def scrub(self, text: str) -> str:
        """``text`` with every secret value (in each of its forms) replaced by ``***``."""
        if self._pattern is None:
            return text
        while True:
            scrubbed = self._pattern.sub(REDACTED, text)
            if scrubbed == text:
                return text
            text = scrubbed  # each pass shortens the text: every form is longer than `***`

    def scrub_data(self, data: Data) -> Data:
        """JSON-like ``data`` (dicts, lists, tuples, strings, anything else as it is) with
        every string scrubbed, mapping keys included; the same shape back."""
        if self._pattern is None:
            return data
        return cast(Data, self._data(data))

    def scrub_model(self, model: Model) -> Model:
        """A pydantic value with every string in it scrubbed, as read back from its JSON."""
        if self._pattern is None:
            return model
        # Most artefacts hold no secret: one search of the JSON text (where every string
        # sits in its JSON form, which is one of the forms searched) spares the rebuild.
        if self._pattern.search(model.model_dump_json(by_alias=True)) is None:
            return model
        data = self._data(model.model_dump(mode="json", by_alias=True))
        return type(model).model_validate(data)

    def _data(self, data: Any) -> Any:
        if isinstance(data, str):
            return self.scrub(data)
        if isinstance(data, Mapping):
            return {
                (self.scrub(key) if isinstance(key, str) else key): self._data(value)
                for key, value in data.items()
            }
        if isinstance(data, list):
            return [self._data(item) for item in data]
        if isinstance(data, tuple):
            return tuple(self._data(item) for item in data)
        return data


def _parts(value: str) -> set[str]:
    """What of one value is a secret: the value, blanks around it aside, and each of its
    lines, each under the module's rules."""
    candidates = {value.strip(), *(line.strip() for line in value.splitlines())}
    return {part for part in candidates if _secret_value(part)}


def _secret_value(value: str) -> bool:
    if len(value) < MIN_LENGTH or value.lower() in NOT_SECRET:
        return False
    return not (len(value) <= _LONGEST_NUMBER and _NUMBER.fullmatch(value))


def _forms(value: str) -> set[str]:
    """The value, and its forms in JSON text and in a URL."""
    return {
        value,
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        urllib.parse.quote(value, safe=""),
        urllib.parse.quote_plus(value, safe=""),
    }
