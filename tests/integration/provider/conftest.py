"""Every test here runs with Airflow's database migrated (``tests/support/airflow_env.py``)."""

import pytest


@pytest.fixture(scope="session", autouse=True)
def _airflow_db(airflow_db):
    return airflow_db
