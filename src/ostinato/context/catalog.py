"""Context window sizes by model, with defaults for common models.

Looked up by the model part of a ``provider:model`` id (or its last path segment, for a
local server that names its model by its file), longest matching prefix first.
Add or override entries with ``ContextCatalog({...})`` (the deployment passes the
setting ``models.context_windows``, ``OSTINATO_CONTEXT_WINDOWS="model-prefix=tokens,..."``).
"""

from __future__ import annotations

from collections.abc import Mapping

DEFAULT_WINDOW = 128_000

DEFAULTS: dict[str, int] = {
    "claude-": 200_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4": 200_000,
    "gpt-3.5": 16_385,
    "deepseek": 128_000,
    "mistral": 128_000,
    "llama3": 128_000,
    "qwen": 32_768,
    "gemma": 8_192,
    "phi": 16_384,
    "smollm": 8_192,
    "ostinato": 1_000_000,  # the offline model
}


class ContextCatalog:
    def __init__(self, *overrides: Mapping[str, int] | None) -> None:
        """The defaults, with each of ``overrides`` over them in turn (the last wins)."""
        self._windows = dict(DEFAULTS)
        for more in overrides:
            self._windows.update({k.lower(): v for k, v in (more or {}).items()})
        self._prefixes = sorted(self._windows, key=len, reverse=True)
        self._known: dict[str, int] = {}

    def window(self, model_id: str) -> int:
        """The context window of ``provider:model`` (or a bare model name), in tokens."""
        found = self._known.get(model_id)
        if found is None:
            found = self._known[model_id] = self._look_up(model_id)
        return found

    def _look_up(self, model_id: str) -> int:
        full = model_id.lower()
        model = full.split(":", 1)[1] if ":" in full else full
        base = model.rsplit("/", 1)[-1]  # a file's or a repository's name: .../SmolLM2-...
        for prefix in self._prefixes:
            if full.startswith(prefix) or model.startswith(prefix) or base.startswith(prefix):
                return self._windows[prefix]
        return DEFAULT_WINDOW


def parse(spec: str) -> dict[str, int]:
    """``"gpt-4o=128000,my-model=8192"`` as a mapping; raises ``ValueError`` on a bad entry."""
    out: dict[str, int] = {}
    for entry in filter(None, (part.strip() for part in spec.split(","))):
        name, sep, size = entry.partition("=")
        if not sep or not name.strip() or not size.strip().isdigit():
            raise ValueError(f"{entry!r} is not 'model=tokens'")
        out[name.strip().lower()] = int(size)
    return out
