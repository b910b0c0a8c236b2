"""What a page or a link may show of a checkpoint root: no credentials, however they reach the text.

A root URL may carry user info (``sftp://user:password@host/ck``) or a signed query (an Azure SAS token), and a
storage error's message may quote either, or a storage option's value. Every string a page or its JSON renders
goes through ``Redaction.value``: URLs lose their user info and query, and the values of the root's storage
options (keys, secrets, tokens, connection strings) become ``***``. An exception is shown as a short reason;
the full text goes to the API server's log, where the operator can read it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

from airflow_checkpoint_provider.hooks.checkpoint_storage import CheckpointStorageHook

log = logging.getLogger(__name__)

HIDDEN = "***"
# scheme://userinfo@  (userinfo: anything up to the @ that is not a slash or blank)
_USER_INFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s'\"]*@")
# scheme://host/path?query  (the query is dropped: signed URLs carry their token there)
_QUERY = re.compile(r"(?P<url>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s?'\"]*)\?[^\s'\"]*")
# Storage option values shorter than this are not treated as secrets: masking "eu" or "1" would garble text.
_MIN_SECRET_LENGTH = 4
# Options that name where data is, not who may read it: shown as they are.
_NOT_SECRET = {"endpoint_url", "region_name", "project", "profile", "account_name", "addressing_style"}
MAX_REASON_LENGTH = 300


def public_url(url: str) -> str:
    """``url`` without user info or query (``s3://key:secret@bucket/ck?x=1`` -> ``s3://bucket/ck``)."""
    return _QUERY.sub(r"\g<url>", _USER_INFO.sub(r"\g<scheme>", url))


def _secret_values(options: Any, key: str = "") -> Iterable[str]:
    if isinstance(options, dict):
        for name, value in options.items():
            yield from _secret_values(value, str(name))
    elif isinstance(options, list | tuple):
        for value in options:
            yield from _secret_values(value, key)
    elif isinstance(options, str) and key not in _NOT_SECRET and len(options) >= _MIN_SECRET_LENGTH:
        yield options


class Redaction:
    """Removes credentials from what a page shows; built for one root (``for_root``) or from known secrets."""

    def __init__(self, secrets: Iterable[str] = ()):
        # Longest first, so a secret that contains another is hidden whole.
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    @classmethod
    def for_root(cls, root: Any) -> Redaction:
        """The secrets of ``root``'s connection (its storage options) and of the user info in its URL."""
        secrets: list[str] = []
        match = _USER_INFO.search(root.url)
        if match:
            user_info = root.url[match.end("scheme") : match.end() - 1]
            secrets += [part for part in user_info.split(":") if len(part) >= _MIN_SECRET_LENGTH]
        if root.conn_id:
            try:
                secrets += _secret_values(CheckpointStorageHook(root.conn_id).storage_options())
            except Exception:  # noqa: BLE001 - a connection that cannot be read holds nothing to show
                log.debug("no storage options for connection %s", root.conn_id, exc_info=True)
        return cls(secrets)

    def text(self, text: str) -> str:
        """``text`` with URLs made public and every known secret replaced by ``***``."""
        text = public_url(text)
        for secret in self.secrets:
            text = text.replace(secret, HIDDEN)
        return text

    def value(self, value: Any) -> Any:
        """``value`` (strings, and dicts and lists of them, as views return) with ``text`` applied throughout."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {name: self.value(item) for name, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(item) for item in value]
        return value

    def reason(self, exc: BaseException, what: str) -> str:
        """A short, safe reason for a page (the exception's type and first line); the full error is logged."""
        log.warning("checkpoint pages: %s failed", what, exc_info=exc)
        first = (str(exc).strip().splitlines() or [""])[0]
        short = self.text(f"{type(exc).__name__}: {first}" if first else type(exc).__name__)
        if len(short) > MAX_REASON_LENGTH:
            short = short[: MAX_REASON_LENGTH - 1] + "…"
        return f"{short} (the API server's log has the full error)"
