"""Eval ids for test cases: how a pytest node id becomes a key of ``quarantine.json``.

An eval id may hold only letters, digits and ``. _ / -`` (``ID_PATTERN`` in
``firewall.config``); a pytest node id holds ``::``, ``[...]`` and whatever a
parameter's id contains. The mapping keeps the node id readable:

    tests/test_pay.py::test_refund                 tests/test_pay.py/test_refund
    tests/test_pay.py::TestCheckout::test_timeout  tests/test_pay.py/TestCheckout/test_timeout
    tests/test_pay.py::test_fee[eu-2]              tests/test_pay.py/test_fee.eu-2
    tests/test_pay.py::test_fee[1.5 EUR]           tests/test_pay.py/test_fee.1.5_EUR-392edc0d

- each ``::`` becomes ``/``: a test is a path into its file, as a suite's case is
  ``SUITE/case`` (contract §3);
- the parameters follow the function's name after a ``.``, which no Python name holds;
- a part (the path, the names, the parameters) with any other character gets each
  run of them turned into ``_``, and ``-`` with 8 hex digits of the SHA-256 of the
  part as it was, so that ``[a b]`` and ``[a_b]`` stay two evals.

Node ids are pytest's, relative to its rootdir. The function is pure and imports
nothing of the firewall, so that every front end (the pytest plugin, a JUnit
suite) can give a case the same id: the plugin calls a test ``from_nodeid(NODEID)``,
a JUnit suite ``SUITE/`` + the same (``firewall.runner.junit`` reads the node id
back out of pytest's XML), and ``registry_keys`` lists both for a registry look-up.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

_ALLOWED = "A-Za-z0-9._/-"
_OTHER = re.compile(f"[^{_ALLOWED}]+")
_HASH_CHARS = 8


def from_nodeid(nodeid: str) -> str:
    """The eval id of the test whose pytest node id is ``nodeid``."""
    if not nodeid:
        raise ValueError("a pytest node id is not empty")
    path, _, names = nodeid.partition("::")
    params = None
    bracket = names.find("[")
    if bracket >= 0 and names.endswith("]"):  # names are Python's: the first `[` opens them
        names, params = names[:bracket], names[bracket + 1 : -1]
    parts = [_clean(path), *(_clean(name) for name in names.split("::") if name)]
    eval_id = "/".join(parts)
    return eval_id if params is None else f"{eval_id}.{_clean(params)}"


def _clean(part: str) -> str:
    if not _OTHER.search(part):
        return part
    digest = hashlib.sha256(part.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_CHARS]
    return f"{_OTHER.sub('_', part)}-{digest}"


def registry_keys(test_id: str, suites: Iterable[str]) -> list[str]:
    """The registry keys that name the pytest test ``test_id`` (its ``from_nodeid``): its own,
    and its case's in each JUnit suite that may run it (``SUITE/test_id``), so that a
    quarantine made through one door is honoured by the other."""
    return [test_id, *(f"{suite}/{test_id}" for suite in suites)]
