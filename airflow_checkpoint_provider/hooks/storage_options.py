"""fsspec storage options from an Airflow connection: ours, or one of Airflow's standard cloud connections.

Users keep their credentials where Airflow keeps them (``aws_default``, ``google_cloud_default``,
``wasb_default``) and name that connection as ``storage_conn_id``, the way ``ObjectStoragePath(url,
conn_id=...)`` is used. Each field that means something to fsspec becomes its storage option. A field that
would change how credentials are obtained and that fsspec cannot honour (an assumed role, say) is refused
with what to do instead, never silently ignored: the job would otherwise run with other credentials.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

CHECKPOINT_STORAGE = "checkpoint_storage"
# Extra fields that change how credentials are obtained in ways fsspec cannot follow: refused, not ignored.
_AWS_NEEDS_BOTO = ("role_arn", "assume_role_method", "assume_role_kwargs", "external_id", "session_kwargs")
_GOOGLE_UNSUPPORTED = ("impersonation_chain", "key_secret_name", "credential_config_file", "credential_source")
_AZURE_UNSUPPORTED = (
    "tenant_id",
    "client_secret_auth_config",
    "managed_identity_client_id",
    "workload_identity_tenant_id",
)


def write_private_spec(path: Path, storage_options: dict[str, Any]) -> Path:
    """The runtime's spec file holding the storage options, readable by this user alone (mode 600): they never
    go on a command line, which spark-submit and the cluster's masters log and show."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump({"storage_options": storage_options}, handle)
    return path


def _refuse(connection: Any, extra: dict[str, Any], fields: tuple[str, ...], kind: str) -> None:
    present = sorted(name for name in extra if name in fields or name.rsplit("__", 1)[-1] in fields)
    if present:
        raise AirflowFailException(
            f"connection {connection.conn_id!r} ({kind}) sets {', '.join(present)}, which the checkpoint storage "
            "cannot honour; give it credentials fsspec takes (see storage_options.py), or use a "
            "checkpoint_storage connection"
        )


# The form's own extra fields (get_provider_info.py's conn-fields): s3fs takes them inside client_kwargs.
_CLIENT_FIELDS = ("endpoint_url", "region_name")


def _checkpoint_storage(connection: Any, extra: dict[str, Any]) -> dict[str, Any]:
    # Our own form: Login / Password are key / secret, the Endpoint URL and Region fields go into client_kwargs
    # (an empty field is left out), and the rest of the extra JSON is fsspec options as they are.
    options = {name: value for name, value in extra.items() if name not in _CLIENT_FIELDS}
    client = {name: extra[name] for name in _CLIENT_FIELDS if extra.get(name)}
    if client:
        given = options.get("client_kwargs") or {}
        if not isinstance(given, dict):
            raise AirflowFailException(
                f"connection {connection.conn_id!r}: the extra's client_kwargs must be a JSON object, not "
                f"{type(given).__name__}"
            )
        clash = sorted(name for name in client if name in given and given[name] != client[name])
        if clash:
            raise AirflowFailException(
                f"connection {connection.conn_id!r} sets {', '.join(clash)} both in its form field and in the "
                "extra's client_kwargs, to different values; keep one of them"
            )
        options["client_kwargs"] = {**given, **client}
    if connection.login:
        options["key"] = connection.login
    if connection.password:
        options["secret"] = connection.password
    return options


def _aws(connection: Any, extra: dict[str, Any]) -> dict[str, Any]:
    unsupported = sorted(set(extra) & set(_AWS_NEEDS_BOTO))
    if unsupported:
        raise AirflowFailException(
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
    service_config = extra.get("service_config")
    s3_config = service_config.get("s3") if isinstance(service_config, dict) else None
    endpoint = extra.get("endpoint_url") or (s3_config.get("endpoint_url") if isinstance(s3_config, dict) else None)
    if endpoint:
        client["endpoint_url"] = endpoint
    if extra.get("region_name"):
        client["region_name"] = extra["region_name"]
    if "verify" in extra:
        client["verify"] = extra["verify"]
    if isinstance(extra.get("config_kwargs"), dict):
        options["config_kwargs"] = extra["config_kwargs"]  # e.g. path-style addressing for MinIO
    if client:
        options["client_kwargs"] = client
    return options


def _google(connection: Any, extra: dict[str, Any]) -> dict[str, Any]:
    _refuse(connection, extra, _GOOGLE_UNSUPPORTED, "google_cloud_platform")

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
    _refuse(connection, extra, _AZURE_UNSUPPORTED, "wasb")
    extra = {name.removeprefix("extra__wasb__"): value for name, value in extra.items()}
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

    ``checkpoint_storage``: Login / Password are ``key`` / ``secret``, the Endpoint URL and Region fields
    become ``client_kwargs``, the rest of the extra JSON is passed as it is.
    ``aws``: Login / Password, and the extra's ``aws_session_token``, ``profile_name``, ``endpoint_url``,
    ``region_name`` and ``verify``. ``google_cloud_platform``: ``key_path`` or ``keyfile_dict``, and
    ``project``. ``wasb``: Login / Password as account name / key, or ``connection_string``, ``sas_token``.
    """
    if connection is None:
        return {}
    build = _BY_TYPE.get(connection.conn_type)
    if build is None:
        raise AirflowFailException(
            f"connection {connection.conn_id!r} has type {connection.conn_type!r}, which says nothing about "
            f"checkpoint storage; use one of {', '.join(sorted(_BY_TYPE))}"
        )
    return build(connection, dict(connection.extra_dejson or {}))
