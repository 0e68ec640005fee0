"""The Agent Protocol's store (``/langgraph/store/...``): namespaced JSON items, per
owner, kept as protocol records of kind ``lg_item`` (an owner's items are theirs alone:
another owner's namespace is empty). Put, get, delete, search under a namespace prefix
(``filter`` matches values' fields exactly), and the namespaces listed. A ``ttl`` and a
natural-language ``query`` (semantic search) are refused: there is no index for them.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from ostinato.errors import InvalidRequest, NotFound
from ostinato.server.agent_protocol.wire import PREFIX, iso
from ostinato.server.auth import Caller, CurrentCaller
from ostinato.server.context import Context
from ostinato.store.base import utcnow
from ostinato.store.protocol_records import ID_LIMIT, ProtocolRecord, records

KIND = "lg_item"
SCAN = 1000
router = APIRouter(tags=["agent-protocol"])
Json = Annotated[dict[str, Any], Body()]
# A namespace label and a key, bounded so that the owner, the labels and the key always
# fit a record's id (ID_LIMIT): the document states every rule the routes apply.
Label = Annotated[str, StringConstraints(min_length=1, max_length=40, pattern=r"^[^.\x00-\x1f]+$")]
Key = Annotated[str, StringConstraints(min_length=1, max_length=100, pattern=r"^[^\x00]+$")]
Namespace = Annotated[list[Label], Field(min_length=1, max_length=5)]


class _Body(BaseModel):
    # the SDK sends fields this server does not use (``index``): they are ignored
    model_config = ConfigDict(extra="ignore")


class PutItem(_Body):
    namespace: Namespace
    key: Key
    value: dict[str, Any]
    ttl: None = Field(default=None, description="Not supported: items stay until deleted.")


class DeleteItem(_Body):
    namespace: Namespace
    key: Key


def _namespace(value: Any, field: str = "namespace") -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InvalidRequest(f"{field} must be a list of non-empty strings")
    if any(c in v for v in value for c in "\x00\x1e\x1f."):
        raise InvalidRequest(f"{field}: a label may not hold '.' or control characters")
    return value


def _id(caller: Caller, namespace: list[str], key: str | None = None) -> str:
    head = "\x1f".join([caller.owner, *namespace])
    found = head if key is None else f"{head}\x1e{key}"
    if "\x00" in found or len(found) > ID_LIMIT:
        raise InvalidRequest("the namespace and key are too long or hold a NUL")
    return found


def _item(record: ProtocolRecord) -> dict[str, Any]:
    return {
        "namespace": record.data["namespace"],
        "key": record.data["key"],
        "value": record.data["value"],
        "created_at": iso(record.created_at),
        "updated_at": iso(record.updated_at),
    }


@router.put(f"{PREFIX}/store/items", status_code=204, responses={422: {}})
async def put_item(context: Context, caller: CurrentCaller, body: PutItem) -> Response:
    """Store an item (replacing one with the same namespace and key)."""
    namespace, key, value = body.namespace, body.key, body.value
    now = utcnow()
    data = {"namespace": namespace, "key": key, "value": value}
    record = ProtocolRecord(KIND, _id(caller, namespace, key), caller.owner, data, now, now)
    await records(context.runtime.store).put_record(record)
    return Response(status_code=204)


@router.get(f"{PREFIX}/store/items", responses={404: {}, 422: {}})
async def get_item(
    context: Context,
    caller: CurrentCaller,
    key: Annotated[str, Query(min_length=1)],
    namespace: Annotated[str, Query()] = "",
) -> JSONResponse:
    """One item; ``namespace`` is its labels joined with dots."""
    labels = _namespace([n for n in namespace.split(".") if n]) if namespace else []
    found = await records(context.runtime.store).get_record(KIND, _id(caller, labels, key))
    if found is None:
        raise NotFound(f"no item {key!r} in namespace {labels!r}")
    return JSONResponse(_item(found))


@router.delete(f"{PREFIX}/store/items", status_code=204, responses={422: {}})
async def delete_item(context: Context, caller: CurrentCaller, body: DeleteItem) -> Response:
    """Delete an item (deleting a missing one does nothing)."""
    namespace, key = body.namespace, body.key
    await records(context.runtime.store).delete_record(KIND, _id(caller, namespace, key))
    return Response(status_code=204)


async def _under(context: Any, caller: Caller, prefix: list[str]) -> list[ProtocolRecord]:
    head = _id(caller, prefix)
    found = await records(context.runtime.store).list_records(
        KIND, owner=caller.owner, prefix=head, limit=SCAN
    )
    return [r for r in found if r.data["namespace"][: len(prefix)] == prefix]


@router.post(f"{PREFIX}/store/items/search", responses={422: {}})
async def search_items(context: Context, caller: CurrentCaller, body: Json) -> JSONResponse:
    """Items under a namespace prefix, newest first, whose values hold ``filter``."""
    prefix = _namespace(body.get("namespace_prefix") or [], "namespace_prefix")
    if body.get("query"):
        raise InvalidRequest("query (semantic search) is not supported: filter by fields")
    wanted = body.get("filter") or {}
    if not isinstance(wanted, dict):
        raise InvalidRequest("filter must be an object")
    limit, offset = int(body.get("limit") or 10), int(body.get("offset") or 0)
    found = [
        _item(r)
        for r in await _under(context, caller, prefix)
        if all(r.data["value"].get(k) == v for k, v in wanted.items())
    ]
    return JSONResponse({"items": found[offset : offset + limit]})


@router.post(f"{PREFIX}/store/namespaces", responses={422: {}})
async def list_namespaces(context: Context, caller: CurrentCaller, body: Json) -> JSONResponse:
    """The namespaces that hold items, under ``prefix`` (cut at ``max_depth``)."""
    prefix = _namespace(body.get("prefix") or [], "prefix")
    depth = body.get("max_depth")
    seen: list[list[str]] = []
    for record in await _under(context, caller, prefix):
        namespace = list(record.data["namespace"])[: depth or None]
        if namespace not in seen:
            seen.append(namespace)
    limit, offset = int(body.get("limit") or 100), int(body.get("offset") or 0)
    return JSONResponse({"namespaces": sorted(seen)[offset : offset + limit]})
