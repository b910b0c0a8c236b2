"""Provider metadata for Airflow's ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any

from spark_checkpoint_runtime import __version__


def get_provider_info() -> dict[str, Any]:
    """What ``airflow providers list`` and the connection form know about this provider."""
    return {
        "package-name": "airflow-checkpoint-provider",
        "name": "Checkpoints for Spark Structured Streaming",
        "description": "Flink-grade checkpoints, retention and restore for Spark Structured Streaming jobs.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Spark Structured Streaming checkpoints",
                "external-doc-url": "https://spark.apache.org/docs/latest/streaming/index.html",
                "tags": ["apache"],
            }
        ],
        "hooks": [
            {
                "integration-name": "Spark Structured Streaming checkpoints",
                "python-modules": [
                    "airflow_checkpoint_provider.hooks.checkpoint_storage",
                    "airflow_checkpoint_provider.hooks.streaming_job",
                ],
            }
        ],
        "operators": [
            {
                "integration-name": "Spark Structured Streaming checkpoints",
                "python-modules": [
                    "airflow_checkpoint_provider.operators.streaming_job",
                    "airflow_checkpoint_provider.operators.rescale",
                    "airflow_checkpoint_provider.operators.transform",
                    "airflow_checkpoint_provider.operators.retention",
                    "airflow_checkpoint_provider.operators.savepoint",
                    "airflow_checkpoint_provider.operators.stopping",
                ],
            }
        ],
        "sensors": [
            {
                "integration-name": "Spark Structured Streaming checkpoints",
                "python-modules": [
                    "airflow_checkpoint_provider.sensors.checkpoint",
                    "airflow_checkpoint_provider.sensors.health",
                ],
            }
        ],
        "triggers": [
            {
                "integration-name": "Spark Structured Streaming checkpoints",
                "python-modules": [
                    "airflow_checkpoint_provider.triggers.checkpoint",
                    "airflow_checkpoint_provider.triggers.commits",
                    "airflow_checkpoint_provider.triggers.savepoint",
                    "airflow_checkpoint_provider.triggers.health",
                    "airflow_checkpoint_provider.triggers.driver",
                ],
            }
        ],
        "extra-links": [
            "airflow_checkpoint_provider.links.CheckpointHistoryLink",
            "airflow_checkpoint_provider.links.SparkUILink",
        ],
        "plugins": [
            {"name": "checkpoint_provider", "plugin-class": "airflow_checkpoint_provider.plugins.CheckpointsPlugin"}
        ],
        "config": {
            "checkpoint_provider": {
                "description": "Where the checkpoint pages in the Airflow UI (/checkpoints/) look for jobs.",
                "options": {
                    "roots": {
                        "description": "Comma-separated checkpoint roots (paths or fsspec URLs), each optionally "
                        "followed by '|' and the id of the connection that reaches it.",
                        "version_added": None,
                        "type": "string",
                        "example": "/data/checkpoints, s3://bucket/checkpoints|aws_default",
                        "default": "",
                    }
                },
            }
        },
        "connection-types": [
            {
                "hook-class-name": "airflow_checkpoint_provider.hooks.checkpoint_storage.CheckpointStorageHook",
                "hook-name": "Checkpoint Storage (fsspec)",
                "connection-type": "checkpoint_storage",
                # Declared here, not by the hook: Airflow 3.2+ builds the form from provider info without the
                # FAB provider (a hook's get_ui_field_behaviour is deprecated and needs wtforms).
                "ui-field-behaviour": {
                    "hidden-fields": ["schema", "port"],
                    "relabeling": {
                        "host": "Default checkpoint root (path or fsspec URL)",
                        "login": "Access key id (fsspec key)",
                        "password": "Secret access key (fsspec secret)",
                        "extra": "Other fsspec storage options (JSON)",
                    },
                    "placeholders": {
                        "host": "s3://bucket/checkpoints",
                        "login": "AKIA...",
                        "extra": '{"config_kwargs": {"s3": {"addressing_style": "path"}}}',
                    },
                },
                # Stored at the top of the extra JSON under these names; hooks/storage_options.py turns them
                # into s3fs's client_kwargs.
                "conn-fields": {
                    "endpoint_url": {
                        "label": "Endpoint URL",
                        "description": "An S3-compatible store's endpoint (MinIO, Ceph), e.g. http://minio:9000; "
                        "empty for AWS itself",
                        "schema": {"type": ["string", "null"]},
                    },
                    "region_name": {
                        "label": "Region",
                        "description": "The bucket's region, e.g. eu-west-1; empty to let the client find it",
                        "schema": {"type": ["string", "null"]},
                    },
                },
            }
        ],
    }
