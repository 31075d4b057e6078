"""Wake-ups for live views: the events themselves are rows (Event, LogLine), this only says "look now".

The database is the record, so a stream that reconnects resumes from the last id it
saw and nothing is lost when a notification is. Notifications travel over Redis
pub/sub when REDIS_URL is set (web, worker and controller are separate processes),
and through an in-process bus otherwise; a waiter also wakes on a short timeout,
which is what carries news between processes on the embedded defaults.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from django.conf import settings

log = logging.getLogger(__name__)

CHANNEL = "slipway:events"
# How long a waiter sleeps without a wake-up before it looks anyway.
FALLBACK_WAIT = 2.0 if settings.REDIS_URL else 0.5


class _LocalBus:
    def __init__(self) -> None:
        self._generation = 0
        self._cond = threading.Condition()

    def notify(self) -> None:
        with self._cond:
            self._generation += 1
            self._cond.notify_all()

    @property
    def generation(self) -> int:
        return self._generation

    def wait(self, generation: int, timeout: float) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._generation != generation, timeout=timeout)


local_bus = _LocalBus()
_redis_client = None


def _redis():  # type: ignore[no-untyped-def]
    global _redis_client
    if _redis_client is None:
        import redis

        _redis_client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    return _redis_client


def notify(*, app_id: int) -> None:
    """Tell live views that something about ``app_id`` changed."""
    local_bus.notify()
    if settings.REDIS_URL:
        try:
            _redis().publish(CHANNEL, str(app_id))
        except Exception as e:  # a lost wake-up only delays a view by FALLBACK_WAIT
            log.warning("could not publish an event wake-up: %s", e)


class Subscription:
    """Wake-ups for one live stream; subscribe before reading so no change falls between."""

    def __init__(self) -> None:
        self._client: Any = None
        self._pubsub: Any = None

    async def __aenter__(self) -> Subscription:
        if settings.REDIS_URL:
            import redis.asyncio as aioredis

            try:
                self._client = aioredis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2)
                self._pubsub = self._client.pubsub()
                await self._pubsub.subscribe(CHANNEL)
            except Exception as e:  # fall back to timed looks
                log.warning("could not subscribe to event wake-ups: %s", e)
                self._pubsub = None
        self._generation = local_bus.generation
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._pubsub is not None:
            await self._pubsub.aclose()
        if self._client is not None:
            await self._client.aclose()

    async def wait(self, timeout: float = FALLBACK_WAIT) -> None:
        """Return when something may have changed, or after ``timeout`` seconds."""
        if self._pubsub is not None:
            try:
                await self._pubsub.get_message(ignore_subscribe_messages=True, timeout=timeout)
                return
            except Exception:
                self._pubsub = None
        generation = self._generation
        await asyncio.to_thread(local_bus.wait, generation, timeout)
        self._generation = local_bus.generation
