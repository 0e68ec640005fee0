"""Arithmetic without ``eval``: the expression is parsed with ``ast`` and only numbers,
arithmetic operators and a few math functions are evaluated."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": round,
    "floor": math.floor,
    "ceil": math.ceil,
    "log": math.log,
    "log10": math.log10,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "min": min,
    "max": max,
}
_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau}
MAX_EXPONENT = 10_000
MAX_LENGTH = 500


class CalculatorError(ValueError):
    """The expression is not plain arithmetic, or cannot be evaluated."""


def evaluate(expression: str) -> int | float:
    """Evaluate an arithmetic expression such as ``2*(3+4)`` or ``sqrt(2)**2``."""
    if len(expression) > MAX_LENGTH:
        raise CalculatorError(f"the expression is longer than {MAX_LENGTH} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise CalculatorError(f"not an arithmetic expression: {exc.msg}") from None
    try:
        result = _eval(tree.body)
    except ZeroDivisionError:
        raise CalculatorError("division by zero") from None
    except (OverflowError, ValueError, TypeError) as exc:
        if isinstance(exc, CalculatorError):
            raise
        raise CalculatorError(f"cannot evaluate: {exc}") from None
    if isinstance(result, float) and result.is_integer() and abs(result) < 2**53:
        return int(result)
    return result  # type: ignore[no-any-return]


def _eval(node: ast.expr) -> Any:
    match node:
        case ast.Constant(value=value) if isinstance(value, int | float) and not isinstance(
            value, bool
        ):
            return value
        case ast.Name(id=name) if name in _CONSTANTS:
            return _CONSTANTS[name]
        case ast.BinOp(left=left, op=op, right=right) if type(op) in _BINARY:
            lhs, rhs = _eval(left), _eval(right)
            if isinstance(op, ast.Pow) and abs(rhs) > MAX_EXPONENT:
                raise CalculatorError(f"exponents above {MAX_EXPONENT} are refused")
            return _BINARY[type(op)](lhs, rhs)
        case ast.UnaryOp(op=op, operand=operand) if type(op) in _UNARY:
            return _UNARY[type(op)](_eval(operand))
        case ast.Call(func=ast.Name(id=name), args=args, keywords=[]) if name in _FUNCTIONS:
            return _FUNCTIONS[name](*(_eval(a) for a in args))
    raise CalculatorError(f"unsupported element in expression: {ast.unparse(node)!r}")
