"""JUnit XML as real test runners write it, read into cases (contract §3, `result = "junit"`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from firewall.config import ID_PATTERN
from firewall.runner.junit import MAX_BYTES, NotJUnit, case_id, parse_junit
from firewall.testids import from_nodeid

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
        "test_shop.py/test_adds": "passed",
        "test_shop.py/test_total": "failed",
        "test_shop.py/test_param.1": "passed",
        "test_shop.py/test_param.2": "passed",
        "test_shop.py/test_later": "skipped",
        "test_shop.py/test_setup": "error",
    }
    assert cases["test_shop.py/test_total"].file == "test_shop.py"
    assert cases["test_shop.py/test_total"].line == 6  # the def's line (pytest writes 5)
    assert "assert 90 == 100" in cases["test_shop.py/test_total"].message


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


PYTEST_TESTS = """\
import pytest


def test_plain():
    pass


@pytest.mark.parametrize("fee", ["eu-2", "1.5 EUR", "a::b"])
def test_fee(fee):
    pass


class TestCheckout:
    def test_pays(self):
        assert False

    class TestRefund:
        def test_back(self):
            pass


def helper():
    '''
    >>> 1 + 1
    2
    '''
"""


def run_pytest(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("family", ["xunit1", "xunit2"])
def test_a_pytest_case_gets_the_id_the_plugin_gives_its_node_id(
    tmp_path: Path, family: str
) -> None:
    """Both of pytest's JUnit families, a class in a class, parameters, a doctest and a
    directory with a dot in its name: each case's id is from_nodeid of its node id, as
    pytest itself lists them."""
    (tmp_path / "tests" / "v1.2").mkdir(parents=True)
    (tmp_path / "tests" / "test_pay.py").write_text(PYTEST_TESTS)
    (tmp_path / "tests" / "v1.2" / "test_old.py").write_text("def test_old():\n    pass\n")
    args = ("--doctest-modules", "tests")
    listed = run_pytest(tmp_path, "--collect-only", "-q", *args).stdout.splitlines()
    nodeids = [line for line in listed if "::" in line]
    assert len(nodeids) == 8, listed
    run_pytest(tmp_path, "-o", f"junit_family={family}", "--junitxml=junit.xml", *args)

    cases = parse_junit((tmp_path / "junit.xml").read_bytes(), tmp_path)

    assert sorted(case.id for case in cases) == sorted(from_nodeid(n) for n in nodeids)
    assert {case.identity for case in cases} == {"nodeid"}
    by_id = {case.id: case for case in cases}
    assert by_id["tests/test_pay.py/TestCheckout/test_pays"].outcome == "failed"
    assert "tests/test_pay.py/TestCheckout/TestRefund/test_back" in by_id
    assert "tests/v1.2/test_old.py/test_old" in by_id
    assert "tests/test_pay.py/test_fee.1.5_EUR-392edc0d" in by_id


def test_pytest_xunit2_without_its_files_on_disk_still_reads_node_ids() -> None:
    """Read elsewhere than where it ran: the module is the parts before the first class."""
    xml = (
        b'<testsuites><testsuite name="pytest">'
        b'<testcase classname="tests.test_x.TestFoo" name="test_y[a]"/>'
        b'<testcase classname="tests.test_x" name="test_z"/>'
        b"</testsuite></testsuites>"
    )
    assert [case.id for case in parse_junit(xml)] == [
        "tests/test_x.py/TestFoo/test_y.a",
        "tests/test_x.py/test_z",
    ]


def test_a_promptfoo_case_is_named_by_its_description_or_known_by_its_place() -> None:
    cases = parse_junit((SAMPLES / "promptfoo.xml").read_bytes())
    assert [(case.id, case.identity, case.outcome) for case in cases] == [
        ("echo__prompt_1.greets_the_customer_by_name", "name", "passed"),
        ("echo__prompt_1.test_2", "position", "failed"),
        ("echo__prompt_1.test_3", "position", "passed"),
    ]


def test_twins_are_told_apart_by_their_order_alone() -> None:
    xml = b"<testsuite><testcase name='t'/><testcase name='t'/></testsuite>"
    assert [(c.id, c.identity) for c in parse_junit(xml)] == [
        ("t", "position"),
        ("t~2", "position"),
    ]


def test_each_case_keeps_its_own_time_and_an_odd_one_is_none() -> None:
    document = (
        b"<testsuite time='44.0'>"
        b"<testcase name='a' time='0.125'/><testcase name='b' time='1,234.5'/>"
        b"<testcase name='c'/><testcase name='d' time='NaN'/><testcase name='e' time='-1'/>"
        b"<testcase name='f' time='soon'/></testsuite>"
    )
    times = {case.id: case.time for case in parse_junit(document)}
    assert times == {"a": 0.125, "b": 1234.5, "c": None, "d": None, "e": None, "f": None}
