"""Bound what is read of a webhook body under ASGI, before Django reads it.

Django's ASGI handler reads the whole request body (into memory, then a temporary file) before
any view runs, so the view's size check alone would come after an arbitrarily large upload.
This wrapper stops reading a webhook body past ``settings.WEBHOOK_MAX_BYTES``: a body declared
larger is not read at all, and a body without Content-Length (chunked) ends one message past the
limit. The view then answers 413 and records the delivery as it does under WSGI, where the body
stays in the socket until the view reads a bounded amount of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from django.conf import settings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
# Loose on purpose: servers and frameworks spell the three types a little differently.
ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]

PREFIX = "/webhooks/"
_END = {"type": "http.request", "body": b"", "more_body": False}


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers") or []:
        if name.lower() == b"content-length":
            return int(value) if value.isdigit() else None
    return None


class _BoundedReceive:
    """A receive callable that ends the body at the limit (or at once, with ``skip``)."""

    def __init__(self, receive: Receive, limit: int, *, skip: bool) -> None:
        self.receive, self.limit, self.skip = receive, limit, skip
        self.received = 0
        self.ended = False
        self.cut = False

    async def __call__(self) -> Message:
        if self.cut:
            # Django listens for a disconnect while the view runs. Reading on would read the
            # rest of a body we refuse, so wait instead: Django cancels this wait once the
            # answer is sent, and the server closes the connection with the body unread.
            await asyncio.Event().wait()
        if self.ended:
            return await self.receive()
        if self.skip:
            self.ended = self.cut = True
            return dict(_END)
        message = await self.receive()
        if message.get("type") == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.limit and message.get("more_body", False):
                # Hand over what came (more than the limit, so the view refuses it) and stop.
                self.ended = self.cut = True
                message = {**message, "more_body": False}
            elif not message.get("more_body", False):
                self.ended = True
        return message


class WebhookBodyLimit:
    """ASGI middleware limiting how much of a request under /webhooks/ is read."""

    def __init__(self, app: ASGIApp, prefix: str = PREFIX) -> None:
        self.app = app
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or not str(scope.get("path", "")).startswith(self.prefix):
            await self.app(scope, receive, send)
            return
        declared = _declared_length(scope)
        limit = settings.WEBHOOK_MAX_BYTES
        # A body declared too large is refused by the view from its Content-Length: none of it is read.
        skip = declared is not None and declared > limit
        await self.app(scope, _BoundedReceive(receive, limit, skip=skip), send)
