"""What the tests share: fixtures.py and airflow_env.py are pytest plugins (tests/conftest.py registers them),
the rest plain modules. landing.py, local_airflow.py and local_cluster.py are driven by the demo scripts and the
benchmarks too, which import them from here."""
