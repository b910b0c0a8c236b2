"""The Airflow side of airflow-checkpoint-provider. Never imports pyspark.

The operators, sensors, hooks and triggers are not built yet (see the provider issue); the runtime's
on-disk format in ``runtime.layout`` is what they will read.
"""

__version__ = "0.1.0"
