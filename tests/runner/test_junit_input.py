"""JUnit XML as real test runners write it, read into cases (contract §3, `result = "junit"`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from firewall.config import ID_PATTERN
from firewall.runner.junit import MAX_BYTES, NotJUnit, case_id, parse_junit

SAMPLES = Path(__file__).parent.parent / "data" / "junit"


def outcomes(data: bytes) -> dict[str, str]:
    return {case.id: case.outcome for case in parse_junit(data)}


def test_a_real_pytest_junitxml_is_read_with_its_outcomes_and_sources(tmp_path: Path) -> None:
    (tmp_path / "test_shop.py").write_text(
        "import pytest\n\n"
        "def test_adds():\n    assert 1 + 1 == 2\n\n"
        "def test_total():\n    assert 90 == 100\n\n"
        "@pytest.mark.parametrize('n', [1, 2])\ndef test_param(n):\n    assert n\n\n"
        "@pytest.mark.skip(reason='later')\ndef test_later():\n    pass\n\n"
        "@pytest.fixture\ndef broken():\n    raise RuntimeError('setup')\n\n"
        "def test_setup(broken):\n    pass\n"
    )
    report = tmp_path / "junit.xml"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={report}",
            "-o",
            "junit_family=xunit1",
            "test_shop.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        check=False,
    )
    cases = {case.id: case for case in parse_junit(report.read_bytes())}
    assert {i: c.outcome for i, c in cases.items()} == {
        "test_shop.test_adds": "passed",
        "test_shop.test_total": "failed",
        "test_shop.test_param_1": "passed",
        "test_shop.test_param_2": "passed",
        "test_shop.test_later": "skipped",
        "test_shop.test_setup": "error",
    }
    assert cases["test_shop.test_total"].file == "test_shop.py"
    assert cases["test_shop.test_total"].line == 6  # the def's line (pytest writes 5)
    assert "assert 90 == 100" in cases["test_shop.test_total"].message


def test_jest_go_and_nextest_reports_are_read() -> None:
    assert outcomes((SAMPLES / "jest.xml").read_bytes()) == {
        "checkout_adds_an_item": "passed",
        "checkout_pays_with_a_card": "failed",
        "checkout_refunds": "skipped",
    }
    assert outcomes((SAMPLES / "go.xml").read_bytes()) == {
        "example.com/shop/cart.TestAdd": "passed",
        "example.com/shop/cart.TestTotalWithCoupon": "failed",
    }
    assert outcomes((SAMPLES / "nextest.xml").read_bytes()) == {
        "shop.tests.adds": "passed",
        "shop.tests.flaky_total": "failed",
        "shop.tests.timeout": "error",
    }
    (jest_fail,) = [
        c for c in parse_junit((SAMPLES / "jest.xml").read_bytes()) if c.outcome == "failed"
    ]
    assert jest_fail.file == "src/checkout.test.js" and jest_fail.message.startswith(
        "Error: expect"
    )


@pytest.mark.parametrize(
    "classname, name",
    [("a b", "c::d[x y]"), ("", "π ≈ 3.14"), ("pkg.mod", "pkg.mod test"), ("", "::")],
)
def test_every_case_id_is_an_eval_id(classname: str, name: str) -> None:
    import re

    assert re.fullmatch(ID_PATTERN, case_id(classname, name))


def test_two_cases_of_one_name_get_distinct_ids() -> None:
    xml = b"<testsuite><testcase name='t'/><testcase name='t'><failure/></testcase></testsuite>"
    assert outcomes(xml) == {"t": "passed", "t~2": "failed"}


@pytest.mark.parametrize(
    "data, message",
    [
        (b'{"score": 1}', "not XML"),
        (b"<html><body>502</body></html>", "its root is <html>"),
        (b"<testsuite>" * 3, "not XML"),
    ],
)
def test_what_is_not_junit_says_so(data: bytes, message: str) -> None:
    with pytest.raises(NotJUnit, match=message):
        parse_junit(data)


def test_an_entity_bomb_is_refused_not_expanded() -> None:
    bomb = (
        b'<?xml version="1.0"?><!DOCTYPE t [<!ENTITY a "aaaaaaaaaa">'
        + b"".join(
            f'<!ENTITY {c}{n} "&{p};&{p};&{p};&{p};&{p};&{p};&{p};&{p};&{p};&{p};">'.encode()
            for n, (c, p) in enumerate(
                [
                    ("b", "a"),
                    ("c", "b0"),
                    ("d", "c1"),
                    ("e", "d2"),
                    ("f", "e3"),
                    ("g", "f4"),
                    ("h", "g5"),
                ]
            )
        )
        + b']><testsuite><testcase name="&h6;"/></testsuite>'
    )
    with pytest.raises(NotJUnit):
        parse_junit(bomb)


def test_a_report_past_the_size_cap_is_refused() -> None:
    with pytest.raises(NotJUnit, match="more than"):
        parse_junit(b" " * (MAX_BYTES + 1))


def test_each_case_keeps_its_own_time_and_an_odd_one_is_none() -> None:
    document = (
        b"<testsuite time='44.0'>"
        b"<testcase name='a' time='0.125'/><testcase name='b' time='1,234.5'/>"
        b"<testcase name='c'/><testcase name='d' time='NaN'/><testcase name='e' time='-1'/>"
        b"<testcase name='f' time='soon'/></testsuite>"
    )
    times = {case.id: case.time for case in parse_junit(document)}
    assert times == {"a": 0.125, "b": 1234.5, "c": None, "d": None, "e": None, "f": None}
