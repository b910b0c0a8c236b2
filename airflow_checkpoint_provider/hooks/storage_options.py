"""fsspec storage options from an Airflow connection: ours, or one of Airflow's standard cloud connections.

Users keep their credentials where Airflow keeps them (``aws_default``, ``google_cloud_default``,
``wasb_default``) and name that connection as ``storage_conn_id``, the way ``ObjectStoragePath(url,
conn_id=...)`` is used. Each field that means something to fsspec becomes its storage option. A field that
would change how credentials are obtained and that fsspec cannot honour (an assumed role, say) is refused
with what to do instead, never silently ignored: the job would otherwise run with other credentials.
"""

from __future__ import annotations

import json
from typing import Any

from airflow.sdk.exceptions import AirflowException

CHECKPOINT_STORAGE = "checkpoint_storage"
# Extra fields of an aws connection that need boto's credential chain (the amazon provider) to mean anything.
_AWS_NEEDS_BOTO = ("role_arn", "assume_role_method", "assume_role_kwargs", "external_id", "session_kwargs")


def _checkpoint_storage(connection: Any, extra: dict[str, Any]) -> dict[str, Any]:
    # Our own form: the extra JSON is fsspec options as they are; Login / Password are key / secret.
    options = dict(extra)
    if connection.login:
        options["key"] = connection.login
    if connection.password:
        options["secret"] = connection.password
    return options


def _aws(connection: Any, extra: dict[str, Any]) -> dict[str, Any]:
    unsupported = sorted(set(extra) & set(_AWS_NEEDS_BOTO))
    if unsupported:
        raise AirflowException(
            f"connection {connection.conn_id!r} (aws) sets {', '.join(unsupported)}, which the checkpoint storage "
            "cannot honour (s3fs does not assume roles); give it keys, a profile_name, or no credentials (the "
            "environment's), or use a checkpoint_storage connection"
        )
    options: dict[str, Any] = {}
    client: dict[str, Any] = {}
    if connection.login:
        options["key"] = connection.login
    if connection.password:
        options["secret"] = connection.password
    if extra.get("aws_session_token"):
        options["token"] = extra["aws_session_token"]
    if extra.get("profile_name"):
        options["profile"] = extra["profile_name"]
    endpoint = extra.get("endpoint_url") or (extra.get("service_config", {}).get("s3", {}).get("endpoint_url"))
    if endpoint:
        client["endpoint_url"] = endpoint
    if extra.get("region_name"):
        client["region_name"] = extra["region_name"]
    if "verify" in extra:
        client["verify"] = extra["verify"]
    if client:
        options["client_kwargs"] = client
    return options


def _google(connection: Any, extra: dict[str, Any]) -> dict[str, Any]:
    def field(name: str) -> Any:  # the Google provider's form prefixes its extras in older connections
        return extra.get(name) or extra.get(f"extra__google_cloud_platform__{name}")

    options: dict[str, Any] = {}
    if field("key_path"):
        options["token"] = field("key_path")
    elif field("keyfile_dict"):
        keyfile = field("keyfile_dict")
        options["token"] = keyfile if isinstance(keyfile, dict) else json.loads(keyfile)
    if field("project"):
        options["project"] = field("project")
    return options


def _azure_blob(connection: Any, extra: dict[str, Any]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if extra.get("connection_string"):
        return {"connection_string": extra["connection_string"]}
    if connection.login:
        options["account_name"] = connection.login
    if connection.password:
        options["account_key"] = connection.password
    if extra.get("sas_token"):
        options["sas_token"] = extra["sas_token"]
    return options


_BY_TYPE = {
    CHECKPOINT_STORAGE: _checkpoint_storage,
    "aws": _aws,
    "google_cloud_platform": _google,
    "wasb": _azure_blob,
}


def storage_options_from(connection: Any) -> dict[str, Any]:
    """The fsspec storage options a connection stands for; a clear error for a type that cannot say.

    ``checkpoint_storage``: Login / Password are ``key`` / ``secret``, the extra JSON is passed as it is.
    ``aws``: Login / Password, and the extra's ``aws_session_token``, ``profile_name``, ``endpoint_url``,
    ``region_name`` and ``verify``. ``google_cloud_platform``: ``key_path`` or ``keyfile_dict``, and
    ``project``. ``wasb``: Login / Password as account name / key, or ``connection_string``, ``sas_token``.
    """
    if connection is None:
        return {}
    build = _BY_TYPE.get(connection.conn_type)
    if build is None:
        raise AirflowException(
            f"connection {connection.conn_id!r} has type {connection.conn_type!r}, which says nothing about "
            f"checkpoint storage; use one of {', '.join(sorted(_BY_TYPE))}"
        )
    return build(connection, dict(connection.extra_dejson or {}))
