"""Model providers: the ``Model`` interface, its events, the adapters and model choice.

The import list below is the public API. ``create_model("provider:model")`` builds a model;
``select_model`` applies the precedence of a per-request override, the conversation's
choice, the agent's tier and the deployment default; ``autodetect_default`` finds the
default at start-up. See ``docs/models.md``.
"""

from ostinato.models.assembly import MessageBuilder, ModelReply
from ostinato.models.base import (
    Model,
    ModelEvent,
    ModelRequest,
    Retrying,
    Stop,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolDefinition,
    Usage,
)
from ostinato.models.choice import (
    ALLOW_BASE_URL_ENV,
    HEADER_MODEL_API_KEY,
    HEADER_MODEL_BASE_URL,
    HEADER_MODEL_ID,
    TIER_NAMES,
    DefaultModel,
    ModelOverride,
    ModelSelection,
    Tiers,
    autodetect_default,
    describe_models,
    select_model,
)
from ostinato.models.providers import (
    PRESETS,
    Preset,
    ProviderSettings,
    create_model,
    parse_model_id,
)
from ostinato.models.retry import DEFAULT_RETRY_POLICY, RetryPolicy

__all__ = [
    "ALLOW_BASE_URL_ENV",
    "DEFAULT_RETRY_POLICY",
    "HEADER_MODEL_API_KEY",
    "HEADER_MODEL_BASE_URL",
    "HEADER_MODEL_ID",
    "PRESETS",
    "TIER_NAMES",
    "DefaultModel",
    "MessageBuilder",
    "Model",
    "ModelEvent",
    "ModelOverride",
    "ModelReply",
    "ModelRequest",
    "ModelSelection",
    "Preset",
    "ProviderSettings",
    "RetryPolicy",
    "Retrying",
    "Stop",
    "StopReason",
    "TextDelta",
    "ThinkingDelta",
    "Tiers",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolDefinition",
    "Usage",
    "autodetect_default",
    "create_model",
    "describe_models",
    "parse_model_id",
    "select_model",
]
