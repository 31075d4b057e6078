"""Reading Server-Sent Events in tests: whole bodies from the test client, frames parsed as a browser would."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync


async def _collect(response: Any) -> bytes:
    return b"".join([chunk async for chunk in response.streaming_content])


def read_stream(response: Any) -> str:
    """Return the whole body of a stream that ends by itself."""
    return async_to_sync(_collect)(response).decode()


@dataclass
class Frame:
    id: str | None
    event: str | None
    data: str | None
    retry: int | None

    def json(self) -> Any:
        assert self.data is not None
        return json.loads(self.data)


def parse_frames(text: str) -> list[Frame]:
    """Return the frames in ``text`` (comments dropped), per the SSE parsing rules."""
    frames = []
    for block in text.split("\n\n"):
        fields: dict[str, list[str]] = {}
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            fields.setdefault(name, []).append(value[1:] if value.startswith(" ") else value)
        if fields:
            frames.append(
                Frame(
                    id=fields.get("id", [None])[-1],
                    event=fields.get("event", [None])[-1],
                    data="\n".join(fields["data"]) if "data" in fields else None,
                    retry=int(fields["retry"][-1]) if "retry" in fields else None,
                )
            )
    return frames
