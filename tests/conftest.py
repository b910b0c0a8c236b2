"""Registers the shared fixtures and hooks (tests/support/): every tier, and every folder run alone, sees them.

``airflow_env`` comes first: it sets Airflow's environment (a temporary AIRFLOW_HOME) before anything imports
Airflow, whichever tests are selected.
"""

pytest_plugins = ["tests.support.airflow_env", "tests.support.fixtures"]
