"""Agents are versioned values: what an agent is (its prompt, tools, tier, budget of model
calls, approval policy ...) as JSON, a content hash of it, and the rule for moving a
conversation to another version. Pure; the store keeps the versions
(``store.versions``) and ``agent_versions`` records and resolves them.

A configuration (at start, and at each reload) that changes an agent makes a new version
of it: number ``n + 1``, kept with its content. A conversation is pinned to the version
of each agent it first ran (``pin``, the default), so its paused approvals, cards,
queued messages and later turns run under that version, until it is moved: to a given
version, or to ``latest`` (the current one, whatever it becomes).

``move_refusal`` is the move rule: a conversation that waits on calls (a pending
approval, a question card) cannot move to a version whose tools leave one of them out
(the call could then never run); the move is refused with the reason.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ostinato.agents import AgentConfig
from ostinato.approvals import ApprovalPolicy
from ostinato.messages import JSON
from ostinato.skills import Skill

LATEST = "latest"


@dataclass(frozen=True, slots=True)
class AgentVersion:
    agent: str
    number: int
    hash: str
    content: JSON


def content_of(skill: Skill) -> JSON:
    """What an agent is, as JSON: everything that decides how its turns run."""
    agent = skill.agent
    approvals = skill.approvals
    return {
        "id": skill.id,
        "persona": skill.persona,
        "description": skill.description,
        "tier": skill.tier,
        "system_prompt": agent.system_prompt,
        "max_model_calls": agent.max_model_calls,
        "model_timeout": agent.model_timeout,
        "max_tokens": agent.max_tokens,
        "tools": list(agent.tools) if agent.tools is not None else None,
        "history_messages": agent.history_messages,
        "history_tokens": agent.history_tokens,
        "heartbeat_interval": agent.heartbeat_interval,
        "request_instructions": agent.request_instructions,
        "approvals": (
            {"ask_for": sorted(approvals.ask_for), "timeout": approvals.timeout}
            if approvals is not None
            else None
        ),
    }


def hash_of(content: JSON) -> str:
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def skill_of(content: JSON) -> Skill:
    """The agent a stored version describes."""
    tools = content.get("tools")
    agent = AgentConfig(
        name=str(content["id"]),
        system_prompt=str(content["system_prompt"]),
        max_model_calls=int(content["max_model_calls"]),
        model_timeout=float(content["model_timeout"]),
        max_tokens=content.get("max_tokens"),
        tools=tuple(tools) if isinstance(tools, list) else None,
        history_messages=int(content["history_messages"]),
        history_tokens=content.get("history_tokens"),
        heartbeat_interval=float(content["heartbeat_interval"]),
        request_instructions=bool(content["request_instructions"]),
    )
    raw: Any = content.get("approvals")
    approvals = (
        ApprovalPolicy(frozenset(raw["ask_for"]), float(raw["timeout"]))
        if isinstance(raw, dict)
        else None
    )
    return Skill(
        str(content["id"]),
        agent,
        content.get("persona"),
        str(content.get("description") or ""),
        str(content.get("tier") or "allegro"),
        approvals,
    )


def move_refusal(waiting: Iterable[str], target: AgentVersion) -> str | None:
    """Why a conversation that waits on calls to the tools ``waiting`` cannot move to
    ``target`` (None: it can). Rules, in order:

    1. Nothing waits: any version will do.
    2. The target lets every tool run (no allow-list): it can.
    3. A waiting call's tool is not in the target's allow-list: refused, naming it.
    """
    pending = sorted(set(waiting))
    allowed = target.content.get("tools")
    if not pending or not isinstance(allowed, list):
        return None
    missing = [tool for tool in pending if tool not in allowed]
    if missing:
        names = ", ".join(repr(t) for t in missing)
        return (
            f"a call to {names} waits for a person in this conversation, and version "
            f"{target.number} of {target.agent!r} has no such tool: answer it (or cancel) first"
        )
    return None
