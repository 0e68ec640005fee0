"""ostinato: run LLM agents as chat conversations."""

__version__ = "0.1.0"
