"""Triggers for deferrable sensors (they live in the installed package, as the triggerer needs)."""

from airflow_checkpoint_provider.triggers.checkpoint import CheckpointTrigger

__all__ = ["CheckpointTrigger"]
