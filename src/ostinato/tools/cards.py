"""Rich cards: built-in tools whose calls a surface draws for a person.

- ``ask_form`` (``ui``): several questions answered together, one step each; the
  answer is ``{"answers": {question id: value}}``.
- ``choose`` (``ui``): options that carry data, each an ``id`` and a ``label``; the
  answer is ``{"id": ...}`` (or ``{"ids": [...]}`` with ``multiple``), so what comes back
  to the model is the id it chose, not a label it has to match.
- ``suggest_replies`` (``action``): reply chips under the answer; a click sends that text
  as the user's next message. It does not pause the turn.
- ``show`` (``action``): a table, or a bar or line chart, from data in a declared shape.
  The surface draws it; nothing the model writes is run as HTML or script. It does not
  pause the turn.

Like ``ask_user``, the ``ui`` tools are never run: the loop pauses the turn at the call
and a person's answer (``tool_response``) becomes its result. ``suggest_replies`` and
``show`` run, and their arguments are checked against the schemas below first, so a
malformed table is an error result the model can fix, never a broken card on a page.
"""

from __future__ import annotations

from typing import Any

from ostinato.errors import ToolError
from ostinato.messages import JSON
from ostinato.tools.base import Tool, ToolContext, Validator
from ostinato.tools.schema import schema_validator

_ID = {"type": "string", "minLength": 1, "maxLength": 100}
_LABEL = {"type": "string", "minLength": 1, "maxLength": 200}
_OPTION = {
    "type": "object",
    "properties": {
        "id": _ID,
        "label": _LABEL,
        "description": {"type": "string", "maxLength": 500},
    },
    "required": ["id", "label"],
    "additionalProperties": False,
}
_QUESTION_TEXT = {"type": "string", "minLength": 1, "maxLength": 1000}

CHOOSE: JSON = {
    "type": "object",
    "properties": {
        "question": _QUESTION_TEXT,
        "options": {"type": "array", "items": _OPTION, "minItems": 1, "maxItems": 20},
        "multiple": {"type": "boolean", "description": "Whether several may be chosen."},
    },
    "required": ["question", "options"],
    "additionalProperties": False,
}

ASK_FORM: JSON = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 200},
        "questions": {
            "type": "array",
            "minItems": 1,
            "maxItems": 10,
            "items": {
                "type": "object",
                "properties": {
                    "id": _ID,
                    "question": _QUESTION_TEXT,
                    "options": {
                        "type": "array",
                        "items": _OPTION,
                        "maxItems": 20,
                        "description": "Leave out for a free-text answer.",
                    },
                    "multiple": {"type": "boolean"},
                },
                "required": ["id", "question"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["questions"],
    "additionalProperties": False,
}

SUGGEST_REPLIES: JSON = {
    "type": "object",
    "properties": {
        "replies": {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": 200},
            "minItems": 1,
            "maxItems": 6,
        }
    },
    "required": ["replies"],
    "additionalProperties": False,
}

_CELL = {"type": ["string", "number", "boolean", "null"]}
SHOW: JSON = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 200},
        "table": {
            "type": "object",
            "properties": {
                "columns": {
                    "type": "array",
                    "items": {"type": "string", "maxLength": 200},
                    "minItems": 1,
                    "maxItems": 20,
                },
                "rows": {
                    "type": "array",
                    "items": {"type": "array", "items": _CELL, "maxItems": 20},
                    "maxItems": 500,
                },
            },
            "required": ["columns", "rows"],
            "additionalProperties": False,
        },
        "chart": {
            "type": "object",
            "properties": {
                "type": {"enum": ["bar", "line"]},
                "labels": {
                    "type": "array",
                    "items": {"type": "string", "maxLength": 100},
                    "minItems": 1,
                    "maxItems": 100,
                },
                "series": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 6,
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string", "maxLength": 100},
                            "values": {
                                "type": "array",
                                "items": {"type": "number"},
                                "maxItems": 100,
                            },
                        },
                        "required": ["values"],
                        "additionalProperties": False,
                    },
                },
            },
            "required": ["type", "labels", "series"],
            "additionalProperties": False,
        },
    },
    "anyOf": [{"required": ["table"]}, {"required": ["chart"]}],
    "additionalProperties": False,
}


async def _answered_by_a_person(arguments: JSON, context: ToolContext) -> Any:
    # The loop never runs a ui tool: it pauses the turn and a person answers.
    raise ToolError("this card is answered by the user, not run")


async def _suggested(arguments: JSON, context: ToolContext) -> str:
    replies = arguments["replies"]
    return f"shown to the user as {len(replies)} reply button(s); a click sends that reply"


async def _shown(arguments: JSON, context: ToolContext) -> str:
    what = " and ".join(k for k in ("table", "chart") if k in arguments)
    return f"the {what} is shown to the user"


_compiled: dict[str, Validator] = {}


def _validator(name: str, schema: JSON) -> Validator:
    """The card's argument check, compiled once a process (every runtime has the cards)."""
    found = _compiled.get(name)
    if found is None:
        found = _compiled[name] = schema_validator(schema, where=name, shipped=True)
    return found


def _tool(name: str, description: str, schema: JSON, run: Any, category: Any) -> Tool:
    return Tool(
        name=name,
        description=description,
        parameters=schema,
        run=run,
        validate=_validator(name, schema),
        bounded_check=True,
        category=category,
        risk="safe",
    )


def card_tools() -> list[Tool]:
    """``ask_form``, ``choose``, ``suggest_replies`` and ``show``."""
    return [
        _tool(
            "ask_form",
            "Ask the user several questions at once, as a short form they fill in step by "
            "step; the conversation pauses until they submit it. The answer is "
            '{"answers": {question id: answer}}.',
            ASK_FORM,
            _answered_by_a_person,
            "ui",
        ),
        _tool(
            "choose",
            "Ask the user to pick among options that each carry an id; the conversation "
            'pauses until they choose. The answer is {"id": chosen id} (or {"ids": [...]} '
            "when multiple).",
            CHOOSE,
            _answered_by_a_person,
            "ui",
        ),
        _tool(
            "suggest_replies",
            "Offer the user up to six short replies as buttons under your answer; a click "
            "sends that reply as their next message. Does not wait: answer in text as well.",
            SUGGEST_REPLIES,
            _suggested,
            "action",
        ),
        _tool(
            "show",
            "Show the user data as a table (columns and rows) or a simple bar or line chart "
            "(labels and series of numbers). Does not wait.",
            SHOW,
            _shown,
            "action",
        ),
    ]
