"""The helpers OpenAPI and MCP tools share: names every provider accepts, and schema
validation."""

from __future__ import annotations

import re

import pytest

from ostinato.errors import ToolArgumentsInvalid
from ostinato.tools.schema import ToolSourceError, sanitize_name, schema_validator, unique_names

VALID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@pytest.mark.parametrize(
    ("raw", "prefix", "name"),
    [
        ("getItem", None, "getItem"),
        ("get-item_2", None, "get-item_2"),
        ("echo.upper", None, "echo_upper"),
        ("search items v2!", None, "search_items_v2"),
        ("get_/pets/{petId}", None, "get_pets_petId"),
        ("über", None, "ber"),
        ("!!!", None, "tool"),
        ("", None, "tool"),
        ("add", "fixture", "fixture_add"),
        ("add", "my server", "my_server_add"),
    ],
)
def test_sanitize_name(raw: str, prefix: str | None, name: str) -> None:
    assert sanitize_name(raw, prefix=prefix) == name


def test_long_names_are_cut_with_a_hash_that_keeps_them_apart() -> None:
    a = sanitize_name("x" * 80 + ".a")
    b = sanitize_name("x" * 80 + ".b")
    assert a != b
    assert VALID.match(a) and VALID.match(b)
    assert len(sanitize_name("y" * 200)) == 64


def test_unique_names() -> None:
    unique_names([("a", "GET /a"), ("b", "GET /b")], source="s")
    with pytest.raises(ToolSourceError, match="s: GET /b and GET /a both become the tool 'a'"):
        unique_names([("a", "GET /a"), ("a", "GET /b")], source="s")


def test_schema_validation_names_each_problem() -> None:
    validate = schema_validator(
        {
            "type": "object",
            "properties": {"n": {"type": "integer"}, "tags": {"type": "array"}},
            "required": ["n"],
            "additionalProperties": False,
        }
    )
    assert validate({"n": 1}) == {"n": 1}
    with pytest.raises(ToolArgumentsInvalid) as caught:
        validate({"n": "one", "tags": "x", "extra": 1})
    message = caught.value.message
    assert message.startswith("invalid arguments: ")
    assert "n: 'one' is not of type 'integer'" in message
    assert "tags: 'x' is not of type 'array'" in message
    assert "Additional properties are not allowed ('extra' was unexpected)" in message


def test_an_invalid_schema_is_a_source_error() -> None:
    with pytest.raises(ToolSourceError, match="not a valid JSON schema"):
        schema_validator({"type": "object", "properties": {"n": {"type": "integer-ish"}}})


def test_a_shipped_schema_is_compiled_whatever_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    # A budget already spent: a schema from outside is refused as too slow to check against
    # its metaschema, one of ostinato's own tools compiles (a loaded server still starts).
    import ostinato.bounded.work

    monkeypatch.setattr(ostinato.bounded.work, "CHECK_SECONDS", -1.0)
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    with pytest.raises(ToolSourceError, match="took too long"):
        schema_validator(schema, where="outside")
    validate = schema_validator(schema, where="ours", shipped=True)
    assert validate({"n": 1}) == {"n": 1}
    with pytest.raises(ToolArgumentsInvalid):
        validate({"n": "one"})
