"""What one run of a forged tool may use, and how a run that passes a limit is reported.

Every limit is enforced by the engine or the process it runs in, never by asking the
code to behave: QuickJS counts every allocation (ArrayBuffers included) against the
memory limit and interrupts the code when its CPU time is spent; the stack limit turns
deep recursion into a RangeError; the worker refuses a result longer than the output
limit; the parent kills the worker when the wall time is up.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal, TypeAlias

from ostinato.errors import ToolError

CODE_LIMIT = 4_096  # bytes of JavaScript in one forged tool (UTF-8)

Limit: TypeAlias = Literal[
    "cpu", "memory", "stack", "output", "wall", "fetches", "code", "crash", "error", "rate"
]


@dataclass(frozen=True, slots=True)
class Limits:
    """Limits of one run. ``cpu_s`` is CPU time of the code itself (the worker process
    does nothing else, so the engine's process clock is the code's); ``wall_s`` bounds
    the whole run, fetches included; ``output_bytes`` the JSON of the result;
    ``fetches`` how many requests one run may make."""

    cpu_s: float = 2.0
    wall_s: float = 20.0
    memory_bytes: int = 64 * 1024 * 1024
    stack_bytes: int = 512 * 1024
    output_bytes: int = 256 * 1024
    fetches: int = 10

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of_json(cls, data: dict[str, Any]) -> Limits:
        return cls(**data)


class SandboxError(ToolError):
    """A run that did not produce a value: ``limit`` says which limit it passed, or
    ``error`` for an exception the code threw (its message is in the text)."""

    code = "sandbox_error"

    def __init__(self, message: str, limit: Limit = "error") -> None:
        super().__init__(message)
        self.limit: Limit = limit


def check_code_size(code: str) -> None:
    """``SandboxError`` (limit ``code``) for code over ``CODE_LIMIT`` bytes."""
    size = len(code.encode("utf-8", "replace"))
    if size > CODE_LIMIT:
        raise SandboxError(
            f"the code is {size:,} bytes; a forged tool's code is at most {CODE_LIMIT:,}",
            "code",
        )
