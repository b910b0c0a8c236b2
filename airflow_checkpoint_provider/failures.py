"""Definitive and transient failures: what a retry of a task can change.

A definitive failure raises ``AirflowFailException``: the task fails at once and spends no retry, because the same
try would fail the same way (an argument that does not parse, a refused restore). Anything else stays an
``AirflowException`` or the storage's own error, which Airflow retries. The table per operator and sensor is in
``docs/provider-in-production.md``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from airflow.sdk.exceptions import AirflowFailException


@contextmanager
def definitive_arguments(what: str) -> Iterator[None]:
    """Turn a ``ValueError`` raised while reading a task's arguments (a duration, a date, a flag, a runtime
    option, a job name) into ``AirflowFailException`` naming ``what`` the task was doing."""
    try:
        yield
    except ValueError as exc:
        raise AirflowFailException(f"{what}: {exc}") from None
