"""Functions the edge-case tests name by import path: mocks, user agents, conditions and
checks that fail or block, and a Python agent that calls its tools directly."""

from __future__ import annotations

import threading

#: the slow mock waits on this (the test releases it): no sleep in the tests
RELEASE = threading.Event()
#: the threads the user functions ran in
THREADS: list[str] = []


def broken_mock(arguments, ctx):
    raise RuntimeError("the mock's database is gone")


def broken_user(prompt, context):
    raise ValueError("the user agent crashed")


def broken_bridge(arguments):
    raise KeyError("amount")


def slow_mock(arguments, ctx):
    THREADS.append(threading.current_thread().name)
    RELEASE.wait(timeout=20)
    return {"status": "slow but fine"}


def fast_mock(arguments, ctx):
    THREADS.append(threading.current_thread().name)
    return {"status": "shipped"}


def condition_in_a_thread(now) -> bool:
    THREADS.append(threading.current_thread().name)
    return True


def check_in_a_thread(ctx) -> bool:
    THREADS.append(threading.current_thread().name)
    return True
