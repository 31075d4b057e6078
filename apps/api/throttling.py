"""A limit on failed token attempts per client address, so tokens cannot be guessed at speed.

Fixed windows counted in the cache (Redis in production, so every web process shares
them): after ``rate`` failures in a window, every token attempt from that address is
refused with 429 until the window ends, valid token or not.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from django.core.cache import cache as default_cache
from django.core.cache.backends.base import BaseCache
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

SCOPE = "auth_failure"


def client_ip(meta: dict[str, str], *, num_proxies: int | None = None) -> str:
    """Return the caller's address: REMOTE_ADDR, or the entry NUM_PROXIES from the end of X-Forwarded-For.

    X-Forwarded-For is trusted only when NUM_PROXIES says how many proxies added to it;
    otherwise anyone could pick the address their failures are counted against.
    """
    proxies = api_settings.NUM_PROXIES if num_proxies is None else num_proxies
    remote = meta.get("REMOTE_ADDR", "") or "unknown"
    forwarded = meta.get("HTTP_X_FORWARDED_FOR", "")
    if proxies and forwarded:
        hops = [h.strip() for h in forwarded.split(",") if h.strip()]
        if hops:
            return hops[-min(proxies, len(hops))]
    return remote


def parse_rate(rate: str) -> tuple[int, int]:
    """Return (attempts, seconds) from a rate such as "20/min"."""
    num, duration = SimpleRateThrottle.parse_rate(None, rate)  # type: ignore[arg-type]
    assert num is not None and duration is not None
    return num, duration


class AuthFailureLimiter:
    def __init__(
        self, rate: str | None = None, *, cache: BaseCache | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self.rate = str(rate or api_settings.DEFAULT_THROTTLE_RATES.get(SCOPE) or "20/min")
        self.attempts, self.window = parse_rate(self.rate)
        self.cache = cache or default_cache
        self.clock = clock

    def _key(self, ip: str, now: float) -> str:
        return f"slipway:{SCOPE}:{ip}:{int(now // self.window)}"

    def retry_after(self, ip: str) -> float | None:
        """Return the seconds until ``ip`` may try again, or None when it may try now."""
        now = self.clock()
        failures = self.cache.get(self._key(ip, now), 0)
        if failures < self.attempts:
            return None
        return self.window - (now % self.window)

    def record_failure(self, ip: str) -> None:
        now = self.clock()
        key = self._key(ip, now)
        self.cache.add(key, 0, timeout=self.window + 1)
        try:
            self.cache.incr(key)
        except ValueError:  # expired between add and incr
            self.cache.set(key, 1, timeout=self.window + 1)
