"""Wait for a condition with a deadline, instead of sleeping a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """The condition did not hold before the deadline; the message says what was awaited."""


def wait_for(
    predicate: Callable[[], T | None],
    *,
    timeout: float = 30.0,
    interval: float = 0.1,
    message: str = "condition",
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """Call predicate until it returns something truthy and return that, or raise WaitTimeout.

    Exceptions listed in `ignore` count as "not yet" (e.g. a 404 before an object exists).
    """
    deadline = time.monotonic() + timeout
    last: object = None
    last_exc: BaseException | None = None
    while True:
        try:
            last = predicate()
            if last:
                return last  # type: ignore[return-value]
        except ignore as exc:
            last_exc = exc
        if time.monotonic() >= deadline:
            detail = f"; last exception: {last_exc!r}" if last_exc else f"; last value: {last!r}"
            raise WaitTimeout(f"timed out after {timeout:g}s waiting for {message}{detail}")
        time.sleep(interval)
