"""The checkpoint pages in the Airflow UI: a job list and each job's checkpoint history, under ``/checkpoints/``.

``roots`` reads the configuration, ``views`` gathers what the pages show, ``charts`` and ``pages`` render
it, ``app`` serves it (with Airflow's auth) and ``airflow_checkpoint_provider.plugins`` mounts it.
"""
