"""The spec's tables, word for word, in the code and in docs/concepts.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.deployments.health import PHASE_MEANINGS, REASON_MEANINGS
from apps.deployments.lifecycle import MEANINGS

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT.parent / "shared" / "spec"


def table_rows(text: str, header: str) -> dict[str, str]:
    """Return the first two columns of the markdown table under ``header``."""
    lines = text[text.index(header) :].splitlines()
    rows: dict[str, str] = {}
    started = False
    for line in lines[1:]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if started and not set(cells[0]) <= {"-"}:
                rows[cells[0]] = cells[1]
            started = True
        elif started and rows:
            break
    return rows


CONCEPTS = (ROOT / "docs" / "concepts.md").read_text()


def test_the_status_meanings_are_the_documented_ones():
    assert table_rows(CONCEPTS, "## Status lifecycle") == dict(MEANINGS)


def test_the_health_reasons_are_the_documented_ones():
    assert table_rows(CONCEPTS, "## Runtime health") == REASON_MEANINGS


def test_the_pod_phases_are_the_documented_ones():
    assert table_rows(CONCEPTS, "## Pod phases") == PHASE_MEANINGS


@pytest.mark.skipif(not SPEC.exists(), reason="the source spec is beside the repository only on development machines")
def test_the_code_quotes_the_source_spec_word_for_word():
    spec = (SPEC / "deployments.txt").read_text() + (SPEC / "pod-status-and-rollouts.txt").read_text()
    for meaning in [*MEANINGS.values(), *REASON_MEANINGS.values(), *PHASE_MEANINGS.values()]:
        assert meaning in spec, meaning
