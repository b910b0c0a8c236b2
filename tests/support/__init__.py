"""What the tests share, and what the demo scripts and benchmarks drive too (a landing folder, a local Airflow,
a local Spark cluster). Plain modules: nothing here needs pytest unless it says so."""
