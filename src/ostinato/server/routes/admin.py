"""``/v1/admin/...``: what only an operator may do: every owner's usage
(``GET /v1/admin/usage``), reloading the configuration (``POST /v1/admin/reload``) and
erasing an owner (``DELETE /v1/admin/owners/{owner}``).
An admin is the local owner of mode ``none``, or an owner ``auth.admins`` names who
signed in with a key or a token; anyone else gets 403."""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from ostinato import deletion
from ostinato.errors import Conflict, Forbidden, InvalidRequest
from ostinato.server.auth import Caller, CurrentCaller
from ostinato.server.context import Context
from ostinato.server.routes.usage import (
    ERRORS,
    BudgetOut,
    CountOut,
    ModelOut,
    Since,
    Until,
    days,
    standings,
)
from ostinato.server.schemas import ErrorBody
from ostinato.spend import report
from ostinato.spend.limits import Budgets
from ostinato.spend.rule import Account, Limit
from ostinato.store.spend import SpendStore, UsageRow

router = APIRouter(prefix="/v1/admin", tags=["admin"])
ADMIN_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    403: {"model": ErrorBody, "description": "The caller is not an admin (`auth.admins`)."},
}


async def admin_caller(context: Context, caller: CurrentCaller) -> Caller:
    if not context.auth.settings.admin(caller.owner, caller.method):
        raise Forbidden("only an admin may use this route (see auth.admins)")
    return caller


Admin = Annotated[Caller, Depends(admin_caller)]


class OwnerOut(CountOut):
    owner: str = Field(description='The owner ("" for calls of no owner).')
    budget: BudgetOut | None = Field(description="Their own budget, if one is set.")


class AdminUsageOut(BaseModel):
    currency: str
    since: date
    until: date
    total: CountOut
    owners: list[OwnerOut]
    models: list[ModelOut]
    pools: list[BudgetOut] = Field(
        description="The budgets shared by anonymous callers and by the deployment, if set."
    )


@router.get("/usage", response_model=AdminUsageOut, responses=ADMIN_ERRORS)
async def all_usage(
    context: Context, admin: Admin, since: Since = None, until: Until = None
) -> AdminUsageOut:
    """Every owner's usage from `since` to `until` (UTC days, both included), each with
    their budget as it stands now, and the shared budgets."""
    first, last = days(since, until)
    store, gate = context.runtime.store, context.runtime.spend
    budgets = gate.budgets if gate is not None else Budgets()
    rows: list[UsageRow] = []
    if isinstance(store, SpendStore):
        rows = await store.usage_rows(None, first.isoformat(), last.isoformat())
    owners = []
    for owner, count in report.by(rows, _owner).items():
        own = Account("owner", owner, budgets.own_limit(owner or None))
        found = await standings(context, [own])
        owners.append(
            OwnerOut(owner=owner, budget=found[0] if found else None, **CountOut.fields_of(count))
        )
    pools = [
        Account("anonymous", "", budgets.anonymous or Limit()),
        Account("deployment", "", budgets.deployment or Limit()),
    ]
    return AdminUsageOut(
        currency=budgets.currency,
        since=first,
        until=last,
        total=CountOut(**CountOut.fields_of(report.total(rows))),
        owners=owners,
        models=[
            ModelOut(model=m, **CountOut.fields_of(c))
            for m, c in report.by(rows, lambda r: r.model).items()
        ],
        pools=await standings(context, pools),
    )


def _owner(row: UsageRow) -> str:
    return row.owner


class ReloadOut(BaseModel):
    """A reload applied: the file read, and the settings it changed."""

    source: str
    changed: list[str] = Field(description="`section.setting` names, or a list section.")
    servers: str = Field(
        description="`this`: only this server read its file; `all`: every server on the "
        "database was asked to read its own (several servers share one)."
    )


RELOAD_ERRORS: dict[int | str, dict[str, Any]] = {
    403: {"model": ErrorBody, "description": "The caller is not an admin (`auth.admins`)."},
    409: {
        "model": ErrorBody,
        "description": "This server runs no configuration file it can read again.",
    },
    422: {
        "model": ErrorBody,
        "description": "The file has mistakes, or changes a setting that needs a restart: "
        "nothing was changed; `details` lists each problem (`where: what`).",
    },
}


@router.post("/reload", response_model=ReloadOut, responses=RELOAD_ERRORS)
async def reload(request: Request, context: Context, admin: Admin) -> ReloadOut:
    """Read the configuration again and apply it to new turns (docs/configuration.md,
    Reloading). A file with a mistake changes nothing. With other servers on the same
    database, each is asked to read its own file too."""
    from ostinato.reload import Reloader

    reloader = getattr(request.app.state, "reloader", None)
    if not isinstance(reloader, Reloader):
        raise Conflict("this server was not started from a configuration it can reload")
    outcome = await reloader.reload_logged()
    if not outcome.applied:
        raise Refused(f"the configuration was not reloaded: {'; '.join(outcome.problems)}")
    bus = context.runtime.bus
    bus.command("reload", "", {})
    return ReloadOut(
        source=outcome.source,
        changed=outcome.changed,
        servers="all" if bus.relay is not None else "this",
    )


class Refused(InvalidRequest):
    """A reload refused: the file's problems (422)."""


class ErasedOut(BaseModel):
    owner: str
    conversations: list[str] = Field(description="The ids of the conversations deleted.")


@router.delete(
    "/owners/{owner}",
    response_model=ErasedOut,
    responses={**ADMIN_ERRORS, 409: {"model": ErrorBody, "description": "A turn is running."}},
)
async def erase(context: Context, admin: Admin, owner: str) -> ErasedOut:
    """Erase everything stored of `owner`: their conversations with every row and file
    of them, memory, schedules, jobs, forged tools, MCP servers and their credentials,
    keys, limits, spending and idempotency records; then the database is vacuumed (see
    docs/data.md). An owner with a running turn is a 409 `conversation_busy`; one with
    nothing stored is erased all the same (nothing happens)."""
    runtime = context.runtime
    ids = await deletion.erase_owner(runtime.store, owner, runtime.data_dir, runtime)
    return ErasedOut(owner=owner, conversations=ids)
