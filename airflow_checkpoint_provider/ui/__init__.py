"""The checkpoint pages in the Airflow UI: a job list, each job's checkpoint history, and a "Checkpoints" tab on
DAG and task instance pages, drawn by Airflow's UI as a React app plugin (``static/``) from a JSON API under
``/checkpoints/api/``.

``roots`` reads the configuration, ``views`` gathers what the pages show, ``job_page`` and ``charts`` format it,
``app`` serves it (with Airflow's auth) and ``airflow_checkpoint_provider.plugins`` registers it.
"""
