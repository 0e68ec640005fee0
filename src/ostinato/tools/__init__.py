"""Tools: the registry, Python-function tools and the built-ins."""

from ostinato.tools.base import Category, Risk, Tool, ToolContext
from ostinato.tools.builtins import builtin_tools, default_registry
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolCatalog, ToolRegistry

__all__ = [
    "Category",
    "Risk",
    "Tool",
    "ToolCatalog",
    "ToolContext",
    "ToolRegistry",
    "builtin_tools",
    "default_registry",
    "function_tool",
]
