"""Waiting for the broker's cancelled background tasks at shutdown."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

__all__ = ["await_cancelled"]

logger = logging.getLogger(__name__)


async def await_cancelled(task: asyncio.Future[Any], what: str) -> None:
    """Wait for ``task``, which the caller has cancelled, to end.

    Shutdown goes on whatever the task did: its cancellation is expected and a failure it raised
    before the cancel reached it is logged (naming ``what``), not raised.
    """
    try:
        await task
    except asyncio.CancelledError:
        pass  # the caller's cancel: the expected end
    except Exception:
        logger.exception("%s failed before it was stopped", what)
