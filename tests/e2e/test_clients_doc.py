"""docs/clients.md's Python examples, run as written against ``ostinato serve`` in auth
mode ``keys`` (its URL and a real key put in for the documented ones)."""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
from pathlib import Path

import pytest

from tests.e2e.test_openai_sdk import served

DOC = Path(__file__).resolve().parents[2] / "docs" / "clients.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)

__all__ = ["served"]


def test_the_doc_has_python_examples() -> None:
    assert len(EXAMPLES) >= 3


@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_a_python_example_runs(
    index: int, served: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url, key = served
    code = EXAMPLES[index].replace("http://127.0.0.1:8000", url)
    # the protocol sections' snippets await at the top level, as in a notebook or `python
    # -m asyncio`: compiled so, and run on an event loop
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    compiled = compile(code, f"clients.md example {index + 1}", "exec", flags=flags)
    if compiled.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(compiled, {"KEY": key}))
    else:
        exec(compiled, {"KEY": key})
    assert capsys.readouterr().out.strip()
