"""``/healthz`` (is the store reachable?) and ``/v1/models`` (which model answers)."""

from __future__ import annotations

import logging

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ostinato.server.context import Context
from ostinato.server.schemas import Health, ModelList

router = APIRouter(tags=["service"])
log = logging.getLogger("ostinato.server")


@router.get("/healthz", response_model=Health, responses={503: {"model": Health}})
async def healthz(context: Context) -> Health | JSONResponse:
    """200 when the store answers a read; 503 when it does not."""
    try:
        await context.runtime.store.list_conversations(limit=1)
    except Exception as exc:
        log.warning("health check: the store did not answer: %s", exc)
        unavailable = Health(status="unavailable", store=context.store_name, detail=str(exc))
        return JSONResponse(unavailable.model_dump(), status_code=503)
    return Health(status="ok", store=context.store_name)


@router.get("/v1/models", response_model=ModelList)
async def list_models(context: Context) -> ModelList:
    """The model that answers turns unless a request picks another, then the models the
    tiers resolve to; each model once, with the tiers it serves."""
    if context.models is not None:
        return ModelList.merged(context.models)
    return ModelList.of_default(context.model_name)
