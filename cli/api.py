"""The HTTP side of the CLI: JSON calls with the error shape turned into one exception, and SSE streams that resume."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import requests

USER_AGENT = "slipway-cli/0.1"
TIMEOUT = 30.0


class ApiError(Exception):
    """The server refused a request; ``status`` 0 means it could not be reached."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field = status, code, message, field

    def __str__(self) -> str:
        where = f" ({self.field})" if self.field else ""
        return f"{self.message}{where}"


def error_from(response: requests.Response) -> ApiError:
    try:
        error = response.json()["error"]
        return ApiError(response.status_code, error.get("code", ""), error.get("message", ""), error.get("field"))
    except (ValueError, KeyError, TypeError):
        return ApiError(response.status_code, "http_error", f"The server answered {response.status_code} {response.reason}.")


@dataclass
class Event:
    id: str | None
    event: str
    data: str

    def json(self) -> Any:
        return json.loads(self.data)


def parse_events(chunks: Iterator[str], on_id: Any = None) -> Iterator[Event]:
    """Yield events from SSE text as it arrives; ``on_id(id)`` is called for every id, even of frames without data."""
    buffer = ""
    for chunk in chunks:
        buffer += chunk.replace("\r\n", "\n")
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            event_id, kind, data = None, "message", []
            for line in block.split("\n"):
                if not line or line.startswith(":"):
                    continue
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "id":
                    event_id = value
                elif name == "event":
                    kind = value
                elif name == "data":
                    data.append(value)
            if event_id is not None and on_id is not None:
                on_id(event_id)
            if data:
                yield Event(event_id, kind, "\n".join(data))


class Client:
    def __init__(self, url: str, token: str, *, session: requests.Session | None = None) -> None:
        self.url = url.rstrip("/")
        self.session = session or requests.Session()
        self.session.headers.update({"Authorization": f"Bearer {token}", "User-Agent": USER_AGENT, "Accept": "application/json"})

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", TIMEOUT)
        try:
            response = self.session.request(method, self.url + path, **kwargs)
        except requests.RequestException as e:
            raise ApiError(0, "unreachable", f"Cannot reach {self.url}: {e.__class__.__name__}.") from e
        if response.status_code >= 400:
            raise error_from(response)
        return response

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params or None).json()

    def post(self, path: str, body: dict[str, Any] | None = None, **params: Any) -> Any:
        return self.request("POST", path, json=body or {}, params=params or None).json()

    def patch(self, path: str, body: dict[str, Any]) -> Any:
        return self.request("PATCH", path, json=body).json()

    def text(self, path: str, **params: Any) -> str:
        return self.request("GET", path, params=params or None, headers={"Accept": "text/plain"}).text

    def stream(
        self,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        last_event_id: str | None = None,
        deadline: float | None = None,
        read_timeout: float = 40.0,
        reconnect: bool = True,
        on_id: Any = None,
    ) -> Iterator[Event]:
        """Yield events from an SSE endpoint, reconnecting with Last-Event-ID after a dropped connection.

        ``on_id(id)`` hears every id the server sends, also of frames without data (the
        event stream's first frame says where it starts). Ends when the server ends the
        stream, or raises TimeoutError at ``deadline``.
        The server sends a comment every 15 s, so a read that waits ``read_timeout`` means
        the connection is dead.
        """
        state = {"last": last_event_id}
        backoff = 0.5

        def remember(event_id: str) -> None:
            state["last"] = event_id
            if on_id is not None:
                on_id(event_id)

        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError
            headers = {"Accept": "text/event-stream"}
            if state["last"] is not None:
                headers["Last-Event-ID"] = state["last"]
            timeout = read_timeout if remaining is None else max(0.1, min(read_timeout, remaining))
            try:
                with self.session.get(
                    self.url + path, params=params, headers=headers, stream=True, timeout=(10, timeout)
                ) as response:
                    if response.status_code >= 400:
                        raise error_from(response)
                    backoff = 0.5
                    yield from parse_events(response.iter_content(chunk_size=None, decode_unicode=True), on_id=remember)
                    return
            except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError):
                if not reconnect:
                    raise ApiError(0, "unreachable", f"Lost the connection to {self.url}.") from None
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError from None
                # The server went away (restart, proxy timeout): try again, resuming after the last id seen.
                time.sleep(min(backoff, max(0.0, (deadline or float("inf")) - time.monotonic())))
                backoff = min(backoff * 2, 5.0)
