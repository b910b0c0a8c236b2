"""JSON read from storage (``layout.untrusted``): what is refused, and what our own files always pass."""

from __future__ import annotations

import json

import pytest

from spark_checkpoint_runtime.layout.untrusted import _STRING, MAX_DEPTH, UntrustedJson, parse_json_object


def nested(level: int, leaf: object) -> dict:
    """An object with ``leaf`` at ``level`` (the outer object is level 1, its values level 2, and so on)."""
    value = leaf
    for _ in range(level - 2):
        value = [value]
    return {"x": value}


@pytest.mark.parametrize("leaf", [1, [], {}, "text"])
def test_a_value_at_the_deepest_level_parses_and_one_level_deeper_is_refused(leaf):
    assert parse_json_object(json.dumps(nested(MAX_DEPTH, leaf)), what="probe")
    with pytest.raises(UntrustedJson, match="nested deeper"):
        parse_json_object(json.dumps(nested(MAX_DEPTH + 1, leaf)), what="probe")


def test_brackets_inside_strings_do_not_count():
    text = json.dumps({"a": "[" * 100 + '\\"{' * 100, "b": ['"]]]]', "\\"]})
    assert parse_json_object(text, what="probe")["b"] == ['"]]]]', "\\"]


def test_a_bracket_run_too_deep_for_the_parser_is_refused_before_parsing():
    with pytest.raises(UntrustedJson, match=f"nested deeper than {MAX_DEPTH} levels"):
        parse_json_object("[" * 200_000 + "]" * 200_000, what="probe")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": NaN}', "non-finite"),
        ('{"a": 1e400}', "out of range"),
        ('{"a": 123456789012345678901234567890}', "out of range"),
        ("[1, 2]", "not a JSON object"),
        ('{"a": [1, 2', "not valid JSON"),
    ],
)
def test_what_we_never_write_is_refused_with_what_was_wrong(text, message):
    with pytest.raises(UntrustedJson, match=message):
        parse_json_object(text, what="probe")


def test_a_string_left_open_runs_to_the_end_so_its_brackets_do_not_count():
    with pytest.raises(UntrustedJson, match="not valid JSON we wrote: Unterminated string"):
        parse_json_object('{"a": "' + "[" * 100, what="probe")


@pytest.mark.parametrize("text", ['"' + '\\"' * 1000, '"abc\\', '"', 'x"\\', '[{"a": "b\\"]', '"\\\\" "'])
def test_every_quote_starts_a_string_match_so_a_hostile_run_of_quotes_costs_one_pass(text):
    # A quote whose match failed would send the scan on to the next quote, and a run of escaped quotes
    # left open would then cost a pass per quote (minutes for a file of a few megabytes).
    assert all(_STRING.match(text, i) for i, char in enumerate(text) if char == '"')
