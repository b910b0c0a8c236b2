"""Example pipelines for the demo and the tests (user code: what a DAG author writes)."""
