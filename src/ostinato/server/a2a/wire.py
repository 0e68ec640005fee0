"""A2A 1.0's JSON-RPC binding: the envelope, the errors, and the requests read. Pure.

Requests are JSON-RPC 2.0 objects (``jsonrpc``, ``id``, ``method``, ``params``) with
A2A's method names (``SendMessage``, ``SendStreamingMessage``, ``GetTask``,
``ListTasks``, ``CancelTask``, ``SubscribeToTask``...); fields are camelCase and enums
their ProtoJSON names (``TASK_STATE_WORKING``, ``ROLE_USER``), as the spec's section 5.5
says. Errors are JSON-RPC error objects with A2A's codes (section 5.4) and a
``google.rpc.ErrorInfo`` detail naming the reason, as the ``a2a-sdk`` client reads them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ostinato.messages import JSON

VERSION = "1.0"
VERSION_HEADER = "a2a-version"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
DOMAIN = "a2a-protocol.org"

METHODS = (
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard",
)
STREAMING = frozenset({"SendStreamingMessage", "SubscribeToTask"})


class A2AError(Exception):
    """An error answered as a JSON-RPC error object (``code``, ``message``, ``reason``)."""

    code = -32603
    reason = "INTERNAL"
    http_status = 200  # JSON-RPC answers errors with 200, but for a body that is no request

    def __init__(self, message: str, rpc_id: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.rpc_id = rpc_id  # the id of the request it answers, when it was read first

    def body(self, rpc_id: Any) -> JSON:
        info = {"@type": ERROR_INFO, "reason": self.reason, "domain": DOMAIN}
        error = {"code": self.code, "message": self.message, "data": [info]}
        return {"jsonrpc": "2.0", "id": rpc_id, "error": error}


class ParseError(A2AError):
    code, reason, http_status = -32700, "PARSE_ERROR", 400


class InvalidRequest(A2AError):
    code, reason, http_status = -32600, "INVALID_REQUEST", 400


class MethodNotFound(A2AError):
    code, reason = -32601, "METHOD_NOT_FOUND"


class InvalidParams(A2AError):
    code, reason = -32602, "INVALID_PARAMS"


class TaskNotFound(A2AError):
    code, reason = -32001, "TASK_NOT_FOUND"


class TaskNotCancelable(A2AError):
    code, reason = -32002, "TASK_NOT_CANCELABLE"


class PushNotSupported(A2AError):
    code, reason = -32003, "PUSH_NOTIFICATION_NOT_SUPPORTED"


class Unsupported(A2AError):
    code, reason = -32004, "UNSUPPORTED_OPERATION"


class ContentTypeNotSupported(A2AError):
    code, reason = -32005, "CONTENT_TYPE_NOT_SUPPORTED"


class VersionNotSupported(A2AError):
    code, reason = -32009, "VERSION_NOT_SUPPORTED"


@dataclass(frozen=True, slots=True)
class Call:
    """One JSON-RPC request: its ``id`` (echoed in the answer), method and params."""

    id: Any
    method: str
    params: JSON


def read_call(raw: bytes) -> Call:
    """The request in ``raw``; ``A2AError`` (with the id when one was read) if it is not
    a JSON-RPC 2.0 request."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise ParseError("the body is not JSON") from None
    if not isinstance(body, dict):
        raise InvalidRequest("a JSON-RPC request is an object (batches are not supported)")
    rpc_id = body.get("id")
    if rpc_id is not None and (isinstance(rpc_id, bool) or not isinstance(rpc_id, str | int)):
        raise InvalidRequest("id must be a string or an integer")
    if body.get("jsonrpc") != "2.0" or not isinstance(body.get("method"), str):
        message = "a JSON-RPC 2.0 request has jsonrpc '2.0' and a method"
        raise InvalidRequest(message, rpc_id)
    params = body.get("params", {})
    if not isinstance(params, dict):
        raise InvalidRequest("params must be an object", rpc_id)
    return Call(rpc_id, body["method"], params)


def error_id(error: A2AError, fallback: Any) -> Any:
    """The id an error answers: its own when it was read before the call was."""
    return error.rpc_id if error.rpc_id is not None else fallback


def result(rpc_id: Any, value: JSON) -> JSON:
    return {"jsonrpc": "2.0", "id": rpc_id, "result": value}


def check_version(header: str | None) -> None:
    """Refuse any version but 1.0 (an absent one means 0.3, section 3.6.2)."""
    asked = (header or "").strip()
    if not asked:
        raise VersionNotSupported(
            "no A2A-Version header: it means version 0.3, which this agent does not speak; "
            f"send A2A-Version: {VERSION}"
        )
    major_minor = ".".join(asked.split(".")[:2])
    if major_minor != VERSION:
        raise VersionNotSupported(
            f"A2A version {asked} is not supported; this agent speaks {VERSION}"
        )


# --- requests -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Incoming:
    """A message a client sent: its text (text parts, and data parts as JSON), the task
    and context it names, and how the answer should come."""

    message_id: str
    text: str
    task_id: str | None
    context_id: str | None
    history_length: int | None
    return_immediately: bool
    parts: tuple[JSON, ...] = field(default=())


def read_send(params: JSON) -> Incoming:
    """``SendMessageRequest`` params; ``InvalidParams`` saying what is wrong."""
    message = params.get("message")
    if not isinstance(message, dict):
        raise InvalidParams("params.message is required (an object)")
    role = message.get("role")
    if role not in ("ROLE_USER", "user"):
        raise InvalidParams("params.message.role must be ROLE_USER")
    parts = message.get("parts")
    if not isinstance(parts, list) or not parts:
        raise InvalidParams("params.message.parts must be a non-empty array")
    configuration = _object(params, "configuration")
    if configuration.get("taskPushNotificationConfig"):
        raise PushNotSupported("push notifications are not supported by this agent")
    text = "\n".join(_part_text(i, p) for i, p in enumerate(parts))
    if not text.strip():
        raise InvalidParams("params.message has no text")
    return Incoming(
        message_id=_string(message, "messageId") or "",
        text=text,
        task_id=_string(message, "taskId"),
        context_id=_string(message, "contextId"),
        history_length=history_length(configuration),
        return_immediately=configuration.get("returnImmediately") is True,
        parts=tuple(parts),
    )


def _part_text(index: int, part: Any) -> str:
    if not isinstance(part, dict):
        raise InvalidParams(f"params.message.parts[{index}] must be an object")
    if isinstance(part.get("text"), str):
        return str(part["text"])
    if "data" in part:
        return json.dumps(part["data"], ensure_ascii=False)
    kind = "a file (raw)" if "raw" in part else "a file (url)" if "url" in part else "unknown"
    raise ContentTypeNotSupported(
        f"params.message.parts[{index}] is {kind}: this agent reads text and data parts only"
    )


def _object(params: JSON, name: str) -> JSON:
    value = params.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidParams(f"params.{name} must be an object")
    return value


def _string(params: JSON, name: str) -> str | None:
    value = params.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidParams(f"{name} must be a string")
    return value


def task_id(params: JSON) -> str:
    """The ``id`` of ``GetTask``, ``CancelTask`` and ``SubscribeToTask``."""
    found = _string(params, "id")
    if found is None:
        raise InvalidParams("params.id (the task's id) is required")
    return found


def history_length(params: JSON) -> int | None:
    value = params.get("historyLength")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidParams("historyLength must be a whole number, 0 or more")
    return value


@dataclass(frozen=True, slots=True)
class Listing:
    """``ListTasks`` params."""

    context_id: str | None
    status: str | None
    page_size: int
    page_token: str | None
    history_length: int | None
    include_artifacts: bool


def read_list(params: JSON) -> Listing:
    size = params.get("pageSize", 50)
    if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= 100:
        raise InvalidParams("pageSize must be a whole number from 1 to 100")
    status = _string(params, "status")
    if status is not None and status not in STATES.values():
        raise InvalidParams(f"status {status!r} is not a task state")
    return Listing(
        context_id=_string(params, "contextId"),
        status=status,
        page_size=size or 50,
        page_token=_string(params, "pageToken"),
        history_length=history_length(params),
        include_artifacts=params.get("includeArtifacts") is True,
    )


STATES = {
    "working": "TASK_STATE_WORKING",
    "input_required": "TASK_STATE_INPUT_REQUIRED",
    "completed": "TASK_STATE_COMPLETED",
    "failed": "TASK_STATE_FAILED",
    "cancelled": "TASK_STATE_CANCELED",
}
"""Each exchange status (``ostinato.exchanges``) as A2A's task state."""
