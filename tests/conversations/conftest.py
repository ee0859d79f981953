"""The storage suites' fixture: these tests run on both engines too."""

from tests.storage.conftest import database_config  # noqa: F401
