"""``benchmarks.processes``: the JVMs a benchmark measures, found under its driver."""

from __future__ import annotations

import psutil

from benchmarks.processes import jvms_under


class _Child:
    def __init__(self, name: str | None):
        self._name = name

    def name(self) -> str:
        if self._name is None:  # a helper that ended between the listing and this look
            raise psutil.NoSuchProcess(4242)
        return self._name


class _Driver:
    def __init__(self, children: list[_Child]):
        self._children = children

    def children(self, recursive: bool = False) -> list[_Child]:
        return self._children


def test_a_helper_that_ends_while_the_children_are_listed_is_skipped():
    # A narrow race (Hadoop forks chmod under the JVM), so stand-ins: it ended a real 200-partition run once.
    java, gone, shell = _Child("java"), _Child(None), _Child("chmod")
    assert jvms_under(_Driver([java, gone, shell])) == [java]
