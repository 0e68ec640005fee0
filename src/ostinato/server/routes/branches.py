"""A conversation's tree on the native API (``ostinato.branching``, ``store.tree``).

- ``POST .../messages/{seq}/edit``: a new version of user message ``seq`` (its text, and
  its files, or the old ones kept), and a turn from there;
- ``POST .../messages/{seq}/regenerate``: a new answer in place of answer ``seq``
  (optionally by another agent or model);

both answered like ``POST .../turns`` (its frames, or its result; a turn that must wait
follows the policy), each beginning with a ``branch.changed`` frame;

- ``GET .../messages/{seq}/siblings``: the versions of a message;
- ``GET .../branches``: the leaves, each a branch a switch can go to;
- ``PUT .../branch``: switch to a leaf (a 422 naming the leaves for any other row).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from ostinato.branching import row_at
from ostinato.errors import InvalidRequest, NotFound
from ostinato.messages import FileBlock, ImageBlock, Message
from ostinato.models.base import Model
from ostinato.runtime import Runtime
from ostinato.server.auth import CurrentCaller, owned
from ostinato.server.context import Context
from ostinato.server.routes.turns import TURN_REQUEST_BODY, TURN_RESPONSES, answer_turn_request
from ostinato.server.schemas import (
    _POLICY,
    CONFLICT,
    ERROR_RESPONSES,
    SEQ_MAX,
    MessageOut,
    PlainText,
    Policy,
    TurnOut,
    TurnRequest,
)
from ostinato.server.uploads import read_turn_request
from ostinato.store.tree import Tree
from ostinato.submissions import Submission

router = APIRouter(prefix="/v1/conversations", tags=["branches"])

Seq = Annotated[int, Path(ge=1, le=SEQ_MAX, description="The row's seq.")]
Responses = dict[int | str, dict[str, Any]]
NO_TREE: Responses = {
    404: ERROR_RESPONSES[404] | {"description": "No such conversation or message."}
}
BAD_ROW: Responses = {
    422: ERROR_RESPONSES[422] | {"description": "The row cannot be used so (see why)."}
}


class RegenerateRequest(BaseModel):
    """How to answer again (every field may be left out)."""

    model_config = ConfigDict(extra="forbid")

    agent: PlainText | None = Field(
        default=None, max_length=200, description="Another agent answers (a 404 if unknown)."
    )
    model: PlainText | None = Field(
        default=None,
        max_length=200,
        description="Another model answers: a tier or a `provider:model` id (a 422 if it "
        "cannot be used, or if this server has one model only).",
    )
    instructions: PlainText | None = Field(default=None, max_length=20_000)
    policy: Policy = _POLICY
    cancel_on_disconnect: StrictBool = False


class SiblingOut(BaseModel):
    seq: int
    leaf: int = Field(description="The newest leaf under it: where a switch to it goes.")
    message: MessageOut


class SiblingsOut(BaseModel):
    parent_seq: int = Field(description="The row they all follow (0: the start).")
    index: int = Field(description="The asked row's place among them, from 0.")
    siblings: list[SiblingOut] = Field(description="Oldest first, the asked row among them.")


class LeafOut(BaseModel):
    seq: int
    current: bool = Field(description="It is the current branch's leaf.")
    forks_at: int = Field(
        description="The last row it shares with the current branch (0: none; its own "
        "seq for the current branch)."
    )
    message: MessageOut


class BranchesOut(BaseModel):
    leaf: int = Field(description="The current branch's last row (0: it has none).")
    leaves: list[LeafOut]


class SwitchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    leaf: int = Field(ge=1, le=SEQ_MAX, description="The leaf (a row without replies).")


class BranchOut(BaseModel):
    leaf: int = Field(description="The current branch's last row.")
    ranges: list[list[int]] = Field(description="Its rows' seq ranges, through `leaf`.")
    since: int = Field(description="Rows after this seq are on it too (rows written later).")


@router.post(
    "/{conversation_id}/messages/{seq}/edit",
    response_model=TurnOut,
    responses={**TURN_RESPONSES, **BAD_ROW},
    openapi_extra=TURN_REQUEST_BODY,
)
async def edit_message(
    context: Context, caller: CurrentCaller, request: Request, conversation_id: str, seq: Seq
) -> TurnOut | Response:
    """Edit user message `seq`: its new text (and files; without files it keeps its own)
    becomes a sibling of it, and a turn answers it there, on a new branch that is now
    current. The body is a turn request's (`text`, ...). 422 for an answer, a tool's or a
    hidden row; 404 for a row the conversation does not have; a turn that is running
    makes it follow `policy` (409 with `reject`)."""
    runtime = context.runtime
    await owned(runtime, caller, conversation_id)
    body, files = await read_turn_request(request)
    if body.tool_response is not None:
        raise InvalidRequest("an edit is new text (and files), not a card's answer")
    if not files:
        files = _attachments(await row_at(runtime.store, conversation_id, seq))

    async def edit(cid: str, message: Message | str, **kw: Any) -> Submission:
        return await runtime.edit(cid, seq, message, **kw)

    return await answer_turn_request(context, caller, request, conversation_id, body, files, edit)


def _attachments(row: Message) -> list[ImageBlock | FileBlock]:
    return [b for b in row.blocks if isinstance(b, ImageBlock | FileBlock)]


@router.post(
    "/{conversation_id}/messages/{seq}/regenerate",
    response_model=TurnOut,
    responses={**TURN_RESPONSES, **BAD_ROW},
)
async def regenerate_message(
    context: Context,
    caller: CurrentCaller,
    request: Request,
    conversation_id: str,
    seq: Seq,
    body: Annotated[RegenerateRequest | None, Body()] = None,
) -> TurnOut | Response:
    """Answer again in place of answer `seq` (an assistant row): a turn from the question
    it answers, on a new branch that is now current; the old answer stays a sibling.
    `agent` or `model` make another one answer. Answered like `POST .../turns`."""
    runtime = context.runtime
    await owned(runtime, caller, conversation_id)
    asked = body or RegenerateRequest()
    model = _model(runtime, asked.model) if asked.model is not None else None
    # a turn request with the regenerate's choices; its text is never stored (the
    # question is the stored one) and only says that a new turn is asked for
    turn = TurnRequest.model_construct(
        text="(regenerate)",
        tool_response=None,
        client_message_id=None,
        policy=asked.policy,
        agent=asked.agent,
        instructions=asked.instructions,
        cancel_on_disconnect=asked.cancel_on_disconnect,
    )

    async def regenerate(cid: str, _message: Message | str, **kw: Any) -> Submission:
        return await runtime.regenerate(cid, seq, **kw)

    return await answer_turn_request(
        context, caller, request, conversation_id, turn, (), regenerate, model
    )


def _model(runtime: Runtime, choice: str) -> Model:
    if runtime.models is None:
        raise InvalidRequest(
            "this server answers with its one model: a regenerate cannot choose another"
        )
    try:
        return runtime.models(choice)
    except Exception as exc:
        reason = getattr(exc, "message", None) or str(exc)
        raise InvalidRequest(f"the model {choice!r} cannot be used: {reason}") from None


async def _tree(runtime: Runtime, conversation_id: str) -> Tree:
    tree = await runtime.store.tree(conversation_id)
    if tree is None:
        raise NotFound(f"no conversation with id {conversation_id!r}")
    return tree


@router.get(
    "/{conversation_id}/messages/{seq}/siblings", response_model=SiblingsOut, responses=NO_TREE
)
async def siblings(
    context: Context, caller: CurrentCaller, conversation_id: str, seq: Seq
) -> SiblingsOut:
    """The versions of message `seq`: the rows that follow the same row as it (its
    edits, or the answers given again), each with the leaf a switch to it goes to."""
    runtime = context.runtime
    await owned(runtime, caller, conversation_id)
    tree = await _tree(runtime, conversation_id)
    if not tree.has(seq):
        raise NotFound(f"no message {seq} in conversation {conversation_id!r}")
    found = tree.siblings(seq)
    out = [
        SiblingOut(
            seq=s,
            leaf=tree.newest_under(s),
            message=MessageOut.of(await row_at(runtime.store, conversation_id, s)),
        )
        for s in found
    ]
    return SiblingsOut(parent_seq=tree.parent(seq), index=found.index(seq), siblings=out)


@router.get("/{conversation_id}/branches", response_model=BranchesOut, responses=NO_TREE)
async def branches(context: Context, caller: CurrentCaller, conversation_id: str) -> BranchesOut:
    """The leaves of the conversation's tree, oldest first: each ends a branch that a
    switch (`PUT .../branch`) can make current."""
    runtime = context.runtime
    conversation = await owned(runtime, caller, conversation_id)
    tree = await _tree(runtime, conversation_id)
    current = conversation.branch
    leaves = []
    for leaf in tree.leaves():
        shared = next((s for s in tree.ancestors(leaf) if s in current and s <= tree.leaf), 0)
        row = await row_at(runtime.store, conversation_id, leaf)
        leaves.append(
            LeafOut(
                seq=leaf, current=leaf == tree.leaf, forks_at=shared, message=MessageOut.of(row)
            )
        )
    return BranchesOut(leaf=tree.leaf, leaves=leaves)


@router.put(
    "/{conversation_id}/branch",
    response_model=BranchOut,
    responses={**ERROR_RESPONSES, **CONFLICT, **BAD_ROW},
)
async def switch(
    context: Context, caller: CurrentCaller, conversation_id: str, body: SwitchRequest
) -> BranchOut:
    """Make the branch that ends at `leaf` current: later turns continue it, and every
    surface is told (`branch.changed`). A paused conversation's card is dismissed and its
    approvals declined first, in the branch it leaves. 422 (naming the leaves) for a row
    that is not a leaf; 409 while a turn runs."""
    runtime = context.runtime
    await owned(runtime, caller, conversation_id)
    branch = await runtime.switch_branch(conversation_id, body.leaf)
    return BranchOut(leaf=body.leaf, ranges=[list(r) for r in branch.ranges], since=branch.since)
