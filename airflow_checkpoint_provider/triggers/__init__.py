"""Triggers for deferrable sensors and Asset watchers (they live in the installed package, as the triggerer
needs)."""

from airflow_checkpoint_provider.triggers.checkpoint import CheckpointTrigger
from airflow_checkpoint_provider.triggers.commits import CheckpointCommitTrigger
from airflow_checkpoint_provider.triggers.savepoint import SavepointTrigger

__all__ = ["CheckpointCommitTrigger", "CheckpointTrigger", "SavepointTrigger"]
