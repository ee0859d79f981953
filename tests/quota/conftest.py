"""The storage suites' fixture: the quota suites that take `database_config` run on both
engines too."""

from tests.storage.conftest import database_config  # noqa: F401
