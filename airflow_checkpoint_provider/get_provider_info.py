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
                "connection-type": "checkpoint_storage",
            }
        ],
    }
