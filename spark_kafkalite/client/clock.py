"""The client's clock: monotonic milliseconds (deadlines, backoffs, linger)."""

from __future__ import annotations

import time

__all__ = ["now_ms"]


def now_ms() -> float:
    """Monotonic clock in milliseconds."""
    return time.monotonic() * 1000.0
