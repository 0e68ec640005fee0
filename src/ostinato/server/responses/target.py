"""Which agent answers a response, and with which model: ``model`` names ``ostinato``
(the default agent, or the router's pick), an agent by its id, or a model id or tier
that ``/v1/models`` lists (the default agent with that model). A model header
(``x-ostinato-model-*``, docs/models.md) wins over either."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from ostinato.models.base import Model
from ostinato.server.context import ServerContext
from ostinato.server.responses.wire import DEFAULT_AGENT, ResponsesError


@dataclass(frozen=True, slots=True)
class Target:
    skill: str | None = None
    model: Model | None = None


def target(context: ServerContext, request: Request, name: str) -> Target:
    chosen = context.model_for(request)
    wanted = name.strip()
    if wanted.lower() == DEFAULT_AGENT:
        return Target(None, chosen)
    skill = context.runtime.router.get(wanted)
    if skill is not None:
        return Target(skill.id, chosen)
    if context.resolve_model is not None and wanted in _listed(context):
        return Target(None, chosen or context.resolve_model(wanted))
    agents = ", ".join([DEFAULT_AGENT, *(s.id for s in context.runtime.router.skills)])
    raise ResponsesError(
        404,
        f"the model {name!r} does not exist: name an agent ({agents}) or a model "
        "GET /v1/models lists",
        code="model_not_found",
        param="model",
    )


def _listed(context: ServerContext) -> set[str]:
    listed = {context.model_name}
    for entry in (context.models or {}).get("data", []):
        listed.add(str(entry.get("id")))
        tier = (entry.get("ostinato") or {}).get("tier")
        if tier:
            listed.add(str(tier))
    return listed
