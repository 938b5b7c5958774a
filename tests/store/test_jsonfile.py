"""The firewall's own JSON files read back as strictly as jq would: UTF-8, no NaN."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from firewall.errors import ArtefactError
from firewall.store.jsonfile import NotUtf8, decode_utf8, non_finite, read_versioned


class Doc(BaseModel):
    schema_version: int
    values: list[float] = []


def read(path: Path) -> Doc:
    return read_versioned(path, Doc, what="report", version=1)


@pytest.mark.parametrize(
    "raw, found",
    [
        ('{"a": 1}'.encode("utf-16"), "is UTF-16 (a BOM)"),
        ('{"a": 1}'.encode("utf-16-le"), "is UTF-16 (NUL bytes between the characters)"),
        ('{"a": 1}'.encode("utf-32"), "is UTF-32 (a BOM)"),
        ('{"a": 1}'.encode("utf-32-be"), "is UTF-32 (NUL bytes between the characters)"),
        (b'{"a": "\xe9"}', "is not UTF-8 (byte 0xe9 at offset 7;"),
    ],
)
def test_text_that_is_not_utf_8_is_named_by_what_it_looks_like(raw: bytes, found: str) -> None:
    with pytest.raises(NotUtf8) as caught:
        decode_utf8(raw)
    assert str(caught.value).startswith(found) and str(caught.value).endswith("re-save it as UTF-8")


def test_utf_8_is_read_with_or_without_a_bom() -> None:
    assert decode_utf8('{"a": "é"}'.encode()) == '{"a": "é"}'
    assert decode_utf8(b"\xef\xbb\xbf{}") == "{}"


def test_non_finite_numbers_are_found_wherever_they_are() -> None:
    data = json.loads('{"a": [1, NaN, {"b": Infinity}], "c": -Infinity, "d": 1e999, "e": 2.5}')
    assert non_finite(data) == [("a", 1), ("a", 2, "b"), ("c",), ("d",)]
    assert non_finite({"a": [1, 2.5, None, "NaN"]}) == []


def test_a_report_in_utf_16_names_the_file_and_the_encoding(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text('{"schema_version": 1}', encoding="utf-16")
    with pytest.raises(ArtefactError) as caught:
        read(path)
    assert str(caught.value) == (
        f"{path}: the report is UTF-16 (a BOM), expected UTF-8: re-save it as UTF-8"
    )


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_a_report_with_nan_is_malformed_at_its_place(tmp_path: Path, token: str) -> None:
    path = tmp_path / "report.json"
    path.write_text(f'{{"schema_version": 1, "values": [0.5, {token}]}}', encoding="utf-8")
    with pytest.raises(ArtefactError) as caught:
        read(path)
    assert str(caught.value).startswith(f"{path}: malformed report at values.1: NaN and infin")


def test_a_valid_report_with_a_utf_8_bom_is_read(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(b'\xef\xbb\xbf{"schema_version": 1, "values": [0.5]}')
    assert read(path).values == [0.5]
