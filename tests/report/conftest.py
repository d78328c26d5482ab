"""The loop's scripted worlds (tests/loop/conftest.py), for the reports of whole cycles."""

from tests.loop.conftest import merge_world, world  # noqa: F401 (fixtures)
