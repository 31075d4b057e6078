"""SSE frames: pure formatting the API and the web UI share."""

from __future__ import annotations

import pytest

from apps.deployments.streams import comment, frame, parse_last_event_id


def test_a_frame_has_id_event_and_json_data():
    assert frame(id=7, event="status", data={"to": "live"}) == 'id: 7\nevent: status\ndata: {"to":"live"}\n\n'


def test_multi_line_data_becomes_one_data_field_per_line():
    assert frame(data="first\nsecond") == "data: first\ndata: second\n\n"


def test_a_newline_cannot_smuggle_a_field_into_id_or_event():
    assert frame(id="1\ndata: x", event="a\nb") == "id: 1 data: x\nevent: a b\n\n"


def test_a_position_frame_moves_the_id_without_an_event():
    assert frame(retry=3000, id=42) == "retry: 3000\nid: 42\n\n"
    assert comment("heartbeat") == ": heartbeat\n\n"


@pytest.mark.parametrize(("raw", "expected"), [(None, None), ("", None), (" 12 ", 12), ("0", 0)])
def test_last_event_id_parses_non_negative_integers(raw, expected):
    assert parse_last_event_id(raw) == expected


@pytest.mark.parametrize("raw", ["-1", "abc", "1.5"])
def test_last_event_id_refuses_anything_else(raw):
    with pytest.raises(ValueError, match="Last-Event-ID must be a non-negative integer"):
        parse_last_event_id(raw)
