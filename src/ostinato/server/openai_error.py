"""An error answered in OpenAI's shape, ``{"error": {"message", "type", "param",
"code"}}``, for both OpenAI-shaped surfaces: Chat Completions (``CompletionError``,
``openai_compat``) and the Responses API (``ResponsesError``, ``responses``). Each names
its statuses' ``type`` in its own table: Chat Completions says ``not_found_error`` and
``conflict_error`` for 404 and 409, the Responses API ``invalid_request_error``, as
OpenAI's own service does on each."""

from __future__ import annotations

from typing import ClassVar, Self

from fastapi.responses import JSONResponse

from ostinato.errors import ClientError
from ostinato.redaction import redact

TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}


class OpenAIError(Exception):
    """An error answered in OpenAI's shape (a ``type`` from ``types`` by status,
    ``server_error`` for a status it does not name)."""

    types: ClassVar[dict[int, str]] = TYPES

    def __init__(
        self, status: int, message: str, *, code: str | None = None, param: str | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param

    @classmethod
    def of(cls, error: ClientError) -> Self:
        """``error`` in this shape (a 422 is OpenAI's 400)."""
        status = 400 if error.status == 422 else error.status
        return cls(status, error.message, code=error.code)

    def response(self, headers: dict[str, str] | None = None) -> JSONResponse:
        body = {
            "error": {
                "message": redact(self.message),
                "type": self.types.get(self.status, "server_error"),
                "param": self.param,
                "code": self.code,
            }
        }
        return JSONResponse(body, status_code=self.status, headers=headers)
