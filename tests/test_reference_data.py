"""The reference data the tests read ships with the project (issue 28): tests/data/reference holds
byte copies of ../shared/reference/*.csv, listed with their sha256 in its README, so a fresh clone
without ../shared runs every test, and a copy that drifts from the shared original is caught."""

from __future__ import annotations

import hashlib
import re

import pandas as pd
import pytest

from conftest import REFERENCE, SHARED


def _listed() -> dict[str, str]:
    """name -> sha256, from the checksum block of tests/data/reference/README.md."""
    text = (REFERENCE / "README.md").read_text()
    return {name: digest for digest, name in re.findall(r"^([0-9a-f]{64})  (\S+\.csv)$", text, re.M)}


def _sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_shipped_copies_match_their_checksums_and_the_shared_reference():
    """Every copy is listed with its checksum and matches it; where ../shared/reference exists (a
    developer's or CI's machine) every shared CSV has a copy here, byte for byte."""
    listed = _listed()
    shipped = {p.name for p in REFERENCE.glob("*.csv")}
    assert len(listed) >= 11 and set(listed) == shipped
    for name, digest in listed.items():
        assert _sha256(REFERENCE / name) == digest, f"tests/data/reference/{name} was edited; change ../shared instead"
    if SHARED.is_dir():
        shared = {p.name: _sha256(p) for p in SHARED.glob("*.csv")}
        assert shared == listed, "../shared/reference changed: copy it to tests/data/reference, update the README"


@pytest.mark.parametrize("name", sorted(_listed()))
def test_shipped_copy_keeps_its_provenance_and_parses(name):
    """Header comments (how it was measured) and a source column or note survive the copy; every file
    reads with pandas.read_csv(comment="#") as ../shared/README.md prescribes."""
    text = (REFERENCE / name).read_text()
    table = pd.read_csv(REFERENCE / name, comment="#")
    assert len(table) > 0 and len(table.columns) >= 3
    assert text.startswith("#") or any(c in table.columns for c in ("source", "sources", "confidence"))
