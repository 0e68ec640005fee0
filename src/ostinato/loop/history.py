"""Making a stored history valid for every provider, and honest to the model. Pure.

The store should never hold an orphan (every turn answers its tool calls before it ends,
and recovery answers those of a crashed turn), but a request must be valid even if it
does: ``repair`` answers any unanswered tool_use right after the message that made it,
drops tool_results whose tool_use is not in the history, and keeps only the first
result of a call that has several (a provider refuses a history with two results for
one call; the store refuses a second result, ``store.answered``, so this is only a
guard).

A reply cut short by a cancel is stored as the text that was shown (``partial`` in its
metadata); ``as_sent`` marks it as cut off, so a model never takes it for a finished
answer (above all one that stopped short of a tool call).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Collection, Sequence

from ostinato.attachments import placeholder
from ostinato.messages import Block, Message, TextBlock, ToolResultBlock, ToolUseBlock
from ostinato.models.assembly import ModelReply

MISSING_RESULT = "no result was recorded for this tool call (it was interrupted)"
CUT_OFF = "[cut off: the user cancelled the turn before this reply was finished]"


def as_requested(history: Sequence[Message]) -> list[Message]:
    """Each row as a request carries it (``placeholder``, ``as_sent``: asked of their role's)."""
    return [
        as_sent(m) if m.role == "assistant" else placeholder(m) if m.role == "user" else m
        for m in history
    ]


def as_sent(message: Message) -> Message:
    """The message as a model is given it: a cancelled reply's text ends with ``CUT_OFF``."""
    if message.role != "assistant" or not message.metadata.get("partial"):
        return message
    text = message.text
    blocks = (TextBlock(f"{text}\n\n{CUT_OFF}" if text else CUT_OFF),)
    return Message(
        "assistant",
        blocks,
        message.hidden,
        message.metadata,
        message.seq,
        message.id,
        message.turn_id,
        message.created_at,
        message.parent_seq,
    )


def tool_ids(messages: Sequence[Message]) -> tuple[set[str], set[str], bool]:
    """The ids of every tool_use and of every tool_result in ``messages`` (one pass), and
    whether some call has more than one result."""
    uses: set[str] = set()
    answered: set[str] = set()
    repeated = False
    for message in messages:
        if message.role == "assistant" or message.role == "tool":
            for block in message.blocks:
                if type(block) is ToolUseBlock:
                    uses.add(block.id)
                elif type(block) is ToolResultBlock:
                    repeated = repeated or block.tool_use_id in answered
                    answered.add(block.tool_use_id)
    return uses, answered, repeated


def repair(
    messages: Sequence[Message], running: Collection[str] = ()
) -> tuple[list[Message], set[str]]:
    """The history made valid, and the ids of every tool_use in it. Calls in ``running``
    are about to be answered by their real result (a turn runs them), so they get none."""
    uses, answered, repeated = tool_ids(messages)
    answered |= set(running)
    if uses == answered and not repeated:
        return list(messages), uses
    out: list[Message] = []
    seen: set[str] = set()  # calls whose (first) result is already kept
    for message in messages:
        if message.tool_results:
            kept = _first_results(message, uses, seen)
            if kept is None:
                continue
            message = kept
        out.append(message)
        missing = [u for u in message.tool_uses if u.id not in answered]
        if missing:
            out.append(
                Message(
                    "tool",
                    tuple(ToolResultBlock(u.id, MISSING_RESULT, is_error=True) for u in missing),
                )
            )
    return out, uses


def _first_results(message: Message, uses: set[str], seen: set[str]) -> Message | None:
    """``message`` without results for calls not in ``uses`` or already in ``seen`` (and
    adding its own to ``seen``); None if nothing is left of it."""
    blocks: list[Block] = []
    for block in message.blocks:
        if isinstance(block, ToolResultBlock):
            if block.tool_use_id not in uses or block.tool_use_id in seen:
                continue
            seen.add(block.tool_use_id)
        blocks.append(block)
    if not blocks:
        return None
    if len(blocks) == len(message.blocks):
        return message
    return Message(message.role, tuple(blocks), message.hidden, message.metadata, message.seq)


def unique_tool_ids(reply: ModelReply, seen: set[str]) -> ModelReply:
    """Give every tool_use of ``reply`` an id not in ``seen`` (and add them to it).

    Some servers number tool calls from zero in every response, or leave the id empty;
    a repeated id would make results ambiguous, so it gets a fresh suffix. Unique ids
    are kept as the provider gave them.
    """
    renamed: dict[str, str] = {}
    blocks: list[Block] = []
    for block in reply.message.blocks:
        if isinstance(block, ToolUseBlock):
            new = block.id
            while not new or new in seen:
                new = f"{block.id or 'call'}_{os.urandom(4).hex()}"
            seen.add(new)
            if new != block.id:
                renamed[block.id] = new
                block = dataclasses.replace(block, id=new)
        blocks.append(block)
    if not renamed:
        return reply
    broken = {renamed.get(k, k): v for k, v in reply.broken_calls.items()}
    message = dataclasses.replace(reply.message, blocks=tuple(blocks))
    return dataclasses.replace(reply, message=message, broken_calls=broken)
