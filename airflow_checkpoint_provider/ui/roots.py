"""Where the checkpoint pages look: ``[checkpoint_provider] roots``.

A comma-separated list of checkpoint roots, each a path or fsspec URL, optionally followed by ``|`` and the
id of the connection that reaches it (``s3://bucket/ck|aws_default``). Set it in ``airflow.cfg`` or as
``AIRFLOW__CHECKPOINT_PROVIDER__ROOTS``. The pages address a root by its position in this list.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from urllib.parse import quote

log = logging.getLogger(__name__)

SECTION = "checkpoint_provider"


@dataclass(frozen=True)
class ConfiguredRoot:
    """One checkpoint root the pages show: its position in the list, URL and optional connection id."""

    index: int
    url: str
    conn_id: str | None = None


def parse_roots(text: str | None) -> list[ConfiguredRoot]:
    """``"/data/ck, s3://b/ck|aws_default"`` as roots; a clear error for an entry with an empty part."""
    roots = []
    for entry in (text or "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        url, _, conn_id = (part.strip() for part in entry.partition("|"))
        if not url or ("|" in entry and not conn_id):
            raise ValueError(
                f"[{SECTION}] roots: {entry!r} is not 'ROOT' or 'ROOT|CONNECTION_ID' (e.g. s3://bucket/ck|aws_default)"
            )
        roots.append(ConfiguredRoot(len(roots), url.rstrip("/") or url, conn_id or None))
    return roots


def configured_roots() -> list[ConfiguredRoot]:
    """The roots from Airflow's configuration (empty when none are set)."""
    from airflow.providers.common.compat.sdk import conf

    return parse_roots(conf.get(SECTION, "roots", fallback=""))


def root_index_of(checkpoint_root: str, roots: list[ConfiguredRoot]) -> int | None:
    """The position of ``checkpoint_root`` among the configured roots, or None."""
    wanted = checkpoint_root.rstrip("/")
    return next((root.index for root in roots if root.url == wanted), None)


def job_page_url(checkpoint_root: str, job_name: str) -> str | None:
    """The URL of the job's checkpoint page, when its root is one the pages show (else None).

    Absolute with ``[api] base_url``, else a path on the API server (the UI opens it in the same tab). A
    malformed ``roots`` setting is logged and gives None: it breaks the pages, never the job task making a link.
    """
    from airflow.providers.common.compat.sdk import conf

    try:
        roots = configured_roots()
    except ValueError as e:
        log.warning("no link to the checkpoint page: %s", e)
        return None
    index = root_index_of(checkpoint_root, roots)
    if index is None:
        return None
    base = conf.get("api", "base_url", fallback="").rstrip("/")
    return f"{base}/plugin/checkpoints/jobs/{index}/{quote(job_name)}"
