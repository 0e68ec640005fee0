"""``/healthz`` (ready: is the store reachable, is the server not draining?), ``/livez``
(is the process alive?) and ``/v1/models`` (which model answers)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from ostinato.models.reach import ServerReach
from ostinato.server.context import Context, ServerContext
from ostinato.server.loops import loop_name

router = APIRouter(tags=["service"])
log = logging.getLogger("ostinato.server")


class Load(BaseModel):
    turns_running: int = Field(description="Turns this process runs (each holding a slot).")
    turns_waiting: int = Field(description="New messages waiting for a turn slot.")
    turns_beginning: int = Field(
        default=0, description="Turns being begun now (at most `server.max_starting`)."
    )
    loop_lag_ms: float = Field(description="How late the event loop last ran a timer.")
    loop_lag_max_ms: float = Field(description="The largest lag since the last /healthz.")
    server: str | None = Field(
        default=None,
        description="This process's lease id (servers and `--workers` processes each have "
        "their own; null without a lease, e.g. on the memory store).",
    )
    loop: Literal["uvloop", "asyncio"] = Field(
        default="asyncio",
        description="The event loop this process runs on (`server.loop`).",
    )


class ModelServer(BaseModel):
    url: str = Field(description="The configured model server (`models.base_url`).")
    reachable: bool = Field(description="Whether it listed its models (looked at most every 5 s).")
    detail: str | None = None


class Health(BaseModel):
    status: Literal["ok", "unavailable", "draining"]
    store: str
    detail: str | None = None
    load: Load | None = None
    model_server: ModelServer | None = Field(
        default=None,
        description="With a model server configured (`OSTINATO_BASE_URL`): whether it "
        "answers. An unreachable one does not make the status 503 (the server still "
        "serves what it stores); its turns fail, saying so.",
    )


class ModelOut(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str = Field(
        description="An agent (`ostinato` is the default one) or a `provider:model` id."
    )
    object: Literal["model"] = "model"
    owned_by: str
    ostinato: dict[str, Any] = Field(
        default_factory=dict,
        description="For an agent: `agent` (its skill id), `persona`, `description`. For a "
        "model: `default` and its `reason` for the default model; `tiers`: the tiers it "
        "serves. For both: `choosable`, whether a caller may choose it (a model by its id "
        "or one of its tiers: the `x-ostinato-model-id` header, a conversation's `model`, "
        "the chat-completions `model`; an agent by `persona` or by name).",
    )


class ModelList(BaseModel):
    """OpenAI's list shape, so OpenAI clients can read it; the default model comes first."""

    object: Literal["list"] = "list"
    data: list[ModelOut]

    @classmethod
    def merged(cls, listing: dict[str, Any]) -> ModelList:
        """One entry per model id, in first-seen order: a model that is the default and
        serves tiers (or serves several) is listed once, with every tier it serves."""
        entries: dict[str, dict[str, Any]] = {}
        for raw in listing.get("data", []):
            extra = dict(raw.get("ostinato") or {})
            tier = extra.pop("tier", None)
            entry = entries.setdefault(raw["id"], {**raw, "ostinato": {}})
            entry["ostinato"].update(extra)
            if tier is not None:
                entry["ostinato"].setdefault("tiers", []).append(tier)
        return cls(data=[ModelOut.model_validate(e) for e in entries.values()])

    @classmethod
    def of_default(cls, model_id: str) -> ModelList:
        owner = model_id.split(":", 1)[0]
        return cls(data=[ModelOut(id=model_id, owned_by=owner, ostinato={"default": True})])


@router.get("/healthz", response_model=Health, responses={503: {"model": Health}})
async def healthz(context: Context, request: Request) -> Health | JSONResponse:
    """200 when the store answers a read, with this process's `load` (turns running and
    messages waiting for a slot, the event loop's lag); 503 when the store does not answer, or
    when the server is shutting down (`draining`: it begins no new turn)."""
    if context.runtime.draining:
        draining = Health(status="draining", store=context.store_name, detail="shutting down")
        return JSONResponse(draining.model_dump(), status_code=503)
    try:
        await context.runtime.store.list_conversations(limit=1)
    except Exception as exc:
        log.warning("health check: the store did not answer: %s", exc)
        unavailable = Health(status="unavailable", store=context.store_name, detail=str(exc))
        return JSONResponse(unavailable.model_dump(), status_code=503)
    admission = context.runtime.admission
    load = Load(
        turns_running=admission.running,
        turns_waiting=admission.waiting,
        turns_beginning=admission.starting,
        loop_lag_ms=round(admission.lag.last * 1000, 3),
        loop_lag_max_ms=round(admission.lag.take_max() * 1000, 3),
        server=context.runtime.holder,
        loop=loop_name(asyncio.get_running_loop()),
    )
    health = Health(status="ok", store=context.store_name, load=load)
    reach: ServerReach | None = getattr(request.app.state, "model_server", None)
    if reach is not None:
        reachable, why = await reach.look()
        health.model_server = ModelServer(url=reach.url, reachable=reachable, detail=why)
    return health


class Live(BaseModel):
    status: Literal["alive"] = "alive"
    draining: bool = Field(description="Whether the server has begun shutting down.")


@router.get("/livez", response_model=Live)
async def livez(context: Context) -> Live:
    """200 for as long as the process's event loop answers, draining included: a liveness
    check (restart the process when it fails), where `/healthz` is the readiness check
    (send it no new traffic when it fails). It reads nothing from the store."""
    return Live(draining=context.runtime.draining)


@router.get("/v1/models", response_model=ModelList)
async def list_models(context: Context) -> ModelList:
    """The agents first (`ostinato`, the default agent, then each agent by id: what
    `/v1/chat/completions` takes as `model`), then the model that answers turns unless a
    request picks another, then the models the tiers resolve to; each model once, with the
    tiers it serves; then any other model callers may choose. `ostinato.choosable` says
    whether a caller may choose each (the setting `models.choosable`); choosing another
    model is a 403 listing the choosable ones."""
    listing = (
        ModelList.merged(context.models)
        if context.models is not None
        else ModelList.of_default(context.model_name)
    )
    return ModelList(data=[*_agents(context), *_choosable(context, listing.data)])


def _choosable(context: ServerContext, models: list[ModelOut]) -> list[ModelOut]:
    """Each model marked with whether callers may choose it, then the choosable ids the
    listing does not hold yet (``models.choosable`` may name any)."""
    choices = context.choices
    for entry in models:
        names = [entry.id, *entry.ostinato.get("tiers", [])]
        entry.ostinato["choosable"] = choices is None or any(choices.allows(n) for n in names)
    listed = {entry.id for entry in models}
    extra = [n for n in (choices.names if choices else ()) if ":" in n and n not in listed]
    return models + [
        ModelOut(id=n, owned_by=n.split(":", 1)[0], ostinato={"choosable": True}) for n in extra
    ]


def _agents(context: ServerContext) -> list[ModelOut]:
    router = context.runtime.router
    default = ModelOut(
        id="ostinato",
        owned_by="ostinato",
        ostinato={"agent": router.default.id, "default": True, "choosable": True},
    )
    return [default] + [
        ModelOut(
            id=skill.id,
            owned_by="ostinato",
            ostinato={
                "agent": skill.id,
                "persona": skill.persona,
                "description": skill.description,
                "choosable": True,
            },
        )
        for skill in router.skills
        if skill.id != "ostinato"
    ]
