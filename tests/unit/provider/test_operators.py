"""Durations at the Airflow boundary, on an operator built without running it (retention and refusals under
dag.test() are ``tests/integration/provider/test_operators.py``)."""

from __future__ import annotations


def test_durations_at_the_airflow_boundary_are_seconds_timedeltas_or_units():
    """``timeout=300`` means 300 seconds, as everywhere in Airflow; the runtime gets the unit spelled out."""
    from datetime import timedelta

    from airflow_checkpoint_provider.durations import to_seconds
    from airflow_checkpoint_provider.operators import CheckpointedStreamingJobOperator

    assert [to_seconds(v, name="t") for v in (300, 2.5, "300", timedelta(minutes=5), "5min", "500ms")] == [
        300.0,
        2.5,
        300.0,
        300.0,
        300.0,
        0.5,
    ]
    for bad in ("ten", -1, True, "1e400"):
        try:
            to_seconds(bad, name="timeout")
        except ValueError as exc:
            assert "timeout" in str(exc)
        else:
            raise AssertionError(f"{bad!r} was taken as a duration")
    operator = CheckpointedStreamingJobOperator(
        task_id="t",
        job_name="j",
        checkpoint_root="/tmp/r",
        pipeline="m:f",
        checkpoint_interval=timedelta(seconds=10),
        max_duration=300,
        stop_timeout="2min",
        runtime_options={"min_pause": 5, "checkpoint_timeout": "1h"},
    )
    values = operator.runtime_values("latest", "k")
    assert (values["checkpoint_interval"], values["max_duration"], values["stop_timeout"]) == ("10s", "300s", "120s")
    assert (values["min_pause"], values["checkpoint_timeout"]) == ("5s", "3600s")


def test_an_output_alias_is_scoped_by_its_dag():
    """Two DAGs run a job of one name with a templated output path: each feeds an alias of its own, so a DAG
    scheduled on one is never triggered by the other's commits. A fixed path stays the output's Asset."""
    from datetime import datetime

    from airflow.sdk import DAG, Asset, AssetAlias

    from airflow_checkpoint_provider.operators import CheckpointedStreamingJobOperator

    def job(dag: DAG, sink: str, job_name: str = "orders") -> CheckpointedStreamingJobOperator:
        with dag:
            return CheckpointedStreamingJobOperator(
                task_id="run_job", job_name=job_name, pipeline="examples.pipelines:events", sink=sink
            )

    templated = "parquet:{{ params.output }}"
    first, second = (DAG(dag_id, schedule=None, start_date=datetime(2026, 1, 1)) for dag_id in ("etl_a", "etl_b"))
    assert job(first, templated).outlets == [AssetAlias(name="checkpoint-output:etl_a:orders")]
    assert job(second, templated).outlets == [AssetAlias(name="checkpoint-output:etl_b:orders")]
    third = DAG("etl_c", schedule=None, start_date=datetime(2026, 1, 1))
    assert job(third, templated, "{{ params.job }}").outlets == [AssetAlias(name="checkpoint-output:etl_c:run_job")]
    fixed = DAG("etl_d", schedule=None, start_date=datetime(2026, 1, 1))
    assert job(fixed, "parquet:/data/out").outlets == [Asset(uri="file:///data/out")]


def test_a_transform_names_the_state_variable_of_a_transform_with_state_operator():
    """``state_var`` reaches the runtime's ``transform`` as ``--state-var`` (templated, trimmed), ``timers`` as
    ``--timers``; without them the command names neither, as for every operator other than transformWithState."""
    from airflow_checkpoint_provider.operators import TransformStateOperator

    named = TransformStateOperator(task_id="t", job_name="j", function="m:f", state_var=" count ")
    args = named.command_args()
    assert args[args.index("--state-var") + 1] == "count"
    assert "state_var" in TransformStateOperator.template_fields
    plain = TransformStateOperator(task_id="u", job_name="j", function="m:f").command_args()
    assert "--state-var" not in plain and "--timers" not in plain
    assert "--timers" in TransformStateOperator(task_id="v", job_name="j", function="m:f", timers=True).command_args()
    assert (
        "--state-var"
        not in TransformStateOperator(task_id="w", job_name="j", function="m:f", state_var=" ").command_args()
    )
    try:
        TransformStateOperator(task_id="x", job_name="j", function="m:f", state_var="count", timers=True).command_args()
    except ValueError as exc:
        assert "one of them" in str(exc)
    else:
        raise AssertionError("state_var and timers were both taken")
