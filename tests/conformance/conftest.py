"""The conformance suite runs through both APIs: here ``queue`` is the
synchronous Queue and the asyncio AsyncQueue in turn."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def queue(api_queue: Any) -> Any:
    return api_queue
