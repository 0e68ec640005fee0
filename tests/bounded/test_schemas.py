"""Schemas from outside (``ostinato.bounded.schemas``): nothing outside the schema is
ever read, patterns run in RE2, ``uniqueItems`` is linear, and every check ends within
its budget. The library's own behaviour (a remote ``$ref`` fetched, a backtracking
pattern, a quadratic ``uniqueItems``) is what each test would see without the module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ostinato.bounded import BudgetExceeded
from ostinato.bounded.schemas import (
    MAX_SCHEMA_BYTES,
    SchemaRefused,
    canonical,
    compile_schema,
)
from tests.bounded.internal import SECRET, Secret, internal_service


@pytest.fixture
def internal() -> Iterator[str]:
    with internal_service() as url:
        yield url


def _refused(schema: Any, value: Any = None) -> str:
    """The message of the refusal, whether at compile time or when checking ``value``."""
    with pytest.raises((SchemaRefused, BudgetExceeded)) as refused:
        compile_schema(schema).errors(value if value is not None else {"x": "x"})
    return refused.value.message


def _with(reference: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"x": reference}}


@pytest.mark.parametrize("keyword", ["$ref", "$dynamicRef", "$recursiveRef"])
def test_no_reference_reaches_the_network(internal: str, keyword: str) -> None:
    message = _refused(_with({keyword: f"{internal}/secret.json"}))
    assert "points outside the schema" in message
    assert SECRET not in message and Secret.hits == []


def test_no_reference_reaches_the_disk(tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text(f'{{"enum": ["{SECRET}"]}}')
    message = _refused(_with({"$ref": secret.as_uri()}))
    assert "points outside the schema" in message and SECRET not in message


def test_a_reference_hidden_where_the_walk_does_not_look_still_reads_nothing(
    internal: str,
) -> None:
    """A relative reference under a remote ``$id`` names no scheme; the registry that
    retrieves nothing refuses it when it is followed."""
    schema = {
        "$id": f"{internal}/root.json",
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/inner"}},
        "$defs": {"inner": {"$id": "inner.json", "$ref": "#/nowhere"}},
    }
    message = _refused(schema)
    assert "points nowhere" in message and Secret.hits == []


def test_local_references_work() -> None:
    schema = {
        "type": "object",
        "properties": {"child": {"$ref": "#/$defs/node"}},
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "child": {"$ref": "#/$defs/node"}},
            }
        },
    }
    checked = compile_schema(schema)
    assert checked.errors({"child": {"name": "a", "child": {"name": "b"}}}) == []
    (error,) = checked.errors({"child": {"child": {"name": 3}}})
    assert "is not of type 'string'" in error.message


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#"},
        {
            "type": "object",
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
            "properties": {"x": {"$ref": "#/$defs/a"}},
        },
    ],
)
def test_a_schema_that_refers_to_itself_without_end_is_refused(schema: dict[str, Any]) -> None:
    assert "refers to itself without end" in _refused(schema)


def test_a_backtracking_pattern_runs_in_linear_time() -> None:
    checked = compile_schema(_with({"type": "string", "pattern": "^(a+)+$"}))
    (error,) = checked.errors({"x": "a" * 5000 + "!"})  # Python's re: longer than the universe
    assert "does not match" in error.message
    assert checked.errors({"x": "a" * 5000}) == []


@pytest.mark.parametrize("pattern", [r"(a)\1", "(?=a)b", "(?<!a)b", "a{1001}"])
def test_patterns_the_linear_engine_cannot_run_are_refused(pattern: str) -> None:
    assert "refused" in _refused(_with({"type": "string", "pattern": pattern}))
    assert "refused" in _refused({"type": "object", "patternProperties": {pattern: {}}})


def test_pattern_properties_and_additional_properties_match_in_the_linear_engine() -> None:
    schema = {
        "type": "object",
        "patternProperties": {"^(a+)+$": {"type": "integer"}},
        "additionalProperties": False,
    }
    checked = compile_schema(schema)
    assert checked.errors({"aaa": 1}) == []
    errors = checked.errors({"a" * 3000 + "!": 1, "aa": "x"})
    assert len(errors) == 2
    assert (
        compile_schema({**schema, "additionalProperties": {"type": "string"}}).errors(
            {"b": "ok", "a": 2}
        )
        == []
    )


def test_unevaluated_properties_beside_pattern_properties_is_refused() -> None:
    schema = {"type": "object", "patternProperties": {"^a": {}}, "unevaluatedProperties": False}
    assert "unevaluatedProperties with patternProperties" in _refused(schema)


def test_unique_items_is_linear_and_keeps_json_equality() -> None:
    checked = compile_schema(_with({"type": "array", "uniqueItems": True}))
    many = [{"k": i, "v": [i, str(i)]} for i in range(20_000)]  # quadratic: minutes
    assert checked.errors({"x": many}) == []
    assert checked.errors({"x": [*many, {"v": [7, "7"], "k": 7}]})  # a repeat, keys reordered
    assert checked.errors({"x": [1, 1.0]}) and not checked.errors({"x": [1, True]})
    assert not checked.errors({"x": [0, False, None, "", [], {}]})
    assert canonical({"a": [1, {"b": 2.0}]}) == canonical({"a": [1.0, {"b": 2}]})


def test_a_check_that_would_run_long_ends_within_its_budget() -> None:
    """Forty levels of two-way ``anyOf``: 2**40 paths to a failure."""
    defs: dict[str, Any] = {
        f"l{i}": {"anyOf": [{"$ref": f"#/$defs/l{i + 1}"}, {"$ref": f"#/$defs/l{i + 1}"}]}
        for i in range(40)
    }
    defs["l40"] = {"type": "string"}
    checked = compile_schema(
        {"type": "object", "properties": {"x": {"$ref": "#/$defs/l0"}}, "$defs": defs}
    )
    with pytest.raises(BudgetExceeded, match="took too long"):
        checked.errors({"x": 1}, seconds=0.2)


def test_sizes_depths_and_dialects_are_bounded() -> None:
    huge = {"type": "object", "description": "x" * MAX_SCHEMA_BYTES}
    assert "bytes of JSON" in _refused(huge)
    deep: dict[str, Any] = {"type": "object"}
    for _ in range(100):
        deep = {"type": "object", "properties": {"x": deep}}
    assert "nested deeper" in _refused(deep)
    draft3 = {"$schema": "http://json-schema.org/draft-03/schema#", "type": "object"}
    assert "not supported" in _refused(draft3)
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}
    assert compile_schema(draft7).errors({}) == []
    assert "not a valid JSON schema" in _refused({"type": "object", "minLength": -1})
