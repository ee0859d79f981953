from __future__ import annotations

import pytest

from gateway.devserver import create_app


@pytest.fixture
async def client(aiohttp_client):
    return await aiohttp_client(create_app())
