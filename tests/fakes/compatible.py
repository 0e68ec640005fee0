"""Fakes of the OpenAI-compatible servers the presets name, each refusing what the real
server's request validation refuses, on top of OpenAI's history rules (``FakeChat``).

Where each rule comes from (read in each server's source, 2026-12):

- llama-cpp-python's ``llama_cpp.server`` (0.3.x; ``server/types.py`` and
  ``llama_types.py``): messages are a union of typed dicts, so an assistant ``content``
  must be a string when present (``null`` fails: "Input should be a valid string"); system
  and tool content are a string or null, never a list; user parts are ``text`` and
  ``image_url`` only; roles system, user, assistant, tool, function. A refused request is
  answered 500 ``internal_server_error`` (checked against the real server). It sends no
  ``usage`` in streams, even when asked.
- llama.cpp's ``llama-server`` (``common/chat.cpp``, ``common_chat_msgs_parse_oaicompat``):
  content is a string, a list of ``text`` parts ("Unsupported content part type"), or
  null; a message needs a ``content`` key or ``tool_calls``; a ``null`` ``reasoning_content``,
  ``name`` or ``tool_call_id`` throws; every tool needs a ``description``. Answered 400.
- Ollama (``openai/openai.go``, ``FromChatRequest``): content is a string or a list of
  ``text``, ``image_url`` (a base64 ``data:`` URL of jpeg, png or webp: "image URLs are not
  currently supported") and ``input_audio`` parts ("invalid message format"); ``null``
  only beside ``tool_calls`` ("invalid message content type: <nil>"; older versions refuse
  it always); tool call arguments must be a JSON object ("invalid tool call arguments").
- LM Studio (lmstudio-bug-tracker #261): "'content' field must be a string or an array of
  objects", for every message, assistant tool calls included.
- vLLM (``entrypoints/chat_utils.py``, ``serving_chat.py``): ``file`` parts are refused
  ("Unsupported chat content part type"); ``tool_choice: "auto"`` needs the server started
  with ``--enable-auto-tool-choice`` and a ``--tool-call-parser`` (``auto_tools``).
- Mistral (``mistral-common``, ``protocol/instruct/validator.py``): an assistant message
  needs non-empty text or tool calls; tool call ids (and ``tool_call_id``) are nine
  letters or digits.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from fakes import openai_chat as fc
from fakes.server import JSON, Failure, Stream

ANY_PART = frozenset({"text", "image_url", "file", "input_audio"})
MISTRAL_ID = re.compile(r"[A-Za-z0-9]{9}")


@dataclass(frozen=True)
class Dialect:
    """What one server refuses, and how it says so."""

    name: str
    preset: str  # the ostinato preset that talks to it
    null_content: str = "allowed"  # "allowed" | "with_tool_calls" | "never" | "assistant_never"
    parts: frozenset[str] = ANY_PART  # content part types a user message may carry
    list_roles: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})
    data_images_only: bool = False
    roles: frozenset[str] = frozenset({"system", "developer", "user", "assistant", "tool"})
    needs_content_or_calls: str = ""  # "key": a content key; "text": non-empty text
    needs_tool_description: bool = False
    no_null_fields: bool = False  # reasoning_content, name, tool_call_id may not be null
    object_arguments: bool = False
    short_ids: bool = False
    auto_tools: bool = True
    usage_in_stream: bool = True
    status: int = 400
    error_type: str = "invalid_request_error"


DIALECTS: dict[str, Dialect] = {
    d.name: d
    for d in (
        Dialect(
            "llama-cpp-python",
            "openai-compatible",
            null_content="assistant_never",
            parts=frozenset({"text", "image_url"}),
            list_roles=frozenset({"user"}),
            roles=frozenset({"system", "user", "assistant", "tool", "function"}),
            usage_in_stream=False,
            status=500,
            error_type="internal_server_error",
        ),
        Dialect(
            "llama-server",
            "llamacpp",
            parts=frozenset({"text"}),
            needs_content_or_calls="key",
            needs_tool_description=True,
            no_null_fields=True,
        ),
        Dialect(
            "ollama",
            "ollama",
            null_content="with_tool_calls",
            parts=frozenset({"text", "image_url", "input_audio"}),
            data_images_only=True,
            object_arguments=True,
        ),
        Dialect("lmstudio", "lmstudio", null_content="never"),
        Dialect("vllm", "vllm", parts=ANY_PART - {"file"}),
        Dialect("mistral", "mistral", needs_content_or_calls="text", short_ids=True),
    )
}


class FakeCompatible(fc.FakeChat):
    """A Chat Completions fake with one server's extra rules (``Dialect``)."""

    def __init__(self, dialect: Dialect) -> None:
        super().__init__()
        self.dialect = dialect

    def violation_reply(self, problems: list[str]) -> Failure:
        return fc.error(self.dialect.status, self.dialect.error_type, problems[0], code=None)

    def check(self, body: JSON) -> list[str]:
        problems = super().check(body)
        d = self.dialect
        if d.needs_tool_description:
            problems += [
                f"tools[{i}]: missing description"
                for i, t in enumerate(body.get("tools") or [])
                if "description" not in t.get("function", {})
            ]
        if not d.auto_tools and body.get("tools") and body.get("tool_choice", "auto") == "auto":
            problems.append(
                '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser'
            )
        for i, message in enumerate(body.get("messages") or []):
            problems += [f"messages[{i}]: {p}" for p in check_message(d, message)]
        return problems

    def text(self, text: str) -> Stream:
        """A reply as this server streams it (no usage chunk if it sends none)."""
        events = fc.chunk_events(text)
        if not self.dialect.usage_in_stream:
            events = [e for e in events if not (isinstance(e[1], dict) and "usage" in e[1])]
        return Stream(events)


def check_message(d: Dialect, message: JSON) -> list[str]:
    role = message.get("role")
    problems: list[str] = []
    if role not in d.roles:
        problems.append(f"unknown role {role!r}")
    problems += _check_content(d, message)
    calls = message.get("tool_calls") or []
    text = message.get("content") if d.needs_content_or_calls == "text" else "content" in message
    if d.needs_content_or_calls and role == "assistant" and not text and not calls:
        problems.append("Assistant message must have either content or tool_calls")
    if d.no_null_fields:
        nulls = [
            k for k in ("reasoning_content", "name", "tool_call_id") if message.get(k, 0) is None
        ]
        problems += [f"{k} may not be null" for k in nulls]
    for call in calls:
        problems += _check_call(d, call)
    if (
        d.short_ids
        and role == "tool"
        and not MISTRAL_ID.fullmatch(str(message.get("tool_call_id")))
    ):
        problems.append("Tool call id must be a-z, A-Z, 0-9, with a length of 9")
    return problems


def _check_content(d: Dialect, message: JSON) -> list[str]:
    role, has_calls = message.get("role"), bool(message.get("tool_calls"))
    if "content" not in message:
        return [] if has_calls or d.null_content == "allowed" else ["content is required"]
    content = message["content"]
    if content is None:
        refused = (
            d.null_content == "never"
            or (d.null_content == "with_tool_calls" and not has_calls)
            or (d.null_content == "assistant_never" and role == "assistant")
        )
        return ["invalid message content type: <nil>"] if refused else []
    if isinstance(content, str):
        return []
    if not isinstance(content, list) or role not in d.list_roles:
        return [f"'content' of a {role} message must be a string"]
    return [p for part in content for p in _check_part(d, part)]


def _check_part(d: Dialect, part: Any) -> list[str]:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind not in d.parts:
        return [f"Unsupported content part type: {kind!r}"]
    if kind == "image_url" and d.data_images_only:
        url = part["image_url"]["url"] if isinstance(part["image_url"], dict) else part["image_url"]
        if not str(url).startswith("data:"):
            return ["image URLs are not currently supported, please use base64 encoded data"]
    return []


def _check_call(d: Dialect, call: JSON) -> list[str]:
    problems: list[str] = []
    if call.get("type") != "function" or "function" not in call:
        problems.append("Unsupported tool call type")
    arguments = call.get("function", {}).get("arguments")
    if not isinstance(arguments, str):
        problems.append("tool call arguments must be a string")
    elif d.object_arguments:
        try:
            parsed = json.loads(arguments)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            problems.append("invalid tool call arguments")
    if d.no_null_fields and call.get("id", 0) is None:
        problems.append("tool call id may not be null")
    if d.short_ids and not MISTRAL_ID.fullmatch(str(call.get("id"))):
        problems.append(f"Tool call id was {call.get('id')} but must be a-z, A-Z, 0-9, length 9")
    return problems
