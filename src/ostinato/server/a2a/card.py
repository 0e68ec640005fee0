"""Agent cards: one per agent, public (discovery comes before credentials). Pure.

``/.well-known/agent-card.json`` describes the default agent (the router's pick among
the agents, or the one agent), answering at ``/a2a``; ``/a2a/{agent}/.well-known/
agent-card.json`` describes one agent, answering at ``/a2a/{agent}``. Each card lists
one interface (A2A 1.0 over JSON-RPC), streaming on, push notifications off, and the
agents as skills (their id, persona, description and tier). The security scheme is the
deployment's: a bearer API key in mode ``keys``, the OpenID Connect issuer's tokens in
mode ``oidc``, none in mode ``none`` (where any credential is ignored).
"""

from __future__ import annotations

from collections.abc import Sequence

import ostinato
from ostinato.identity.settings import AuthSettings
from ostinato.messages import JSON
from ostinato.server.a2a.wire import VERSION
from ostinato.skills import Skill

DEFAULT = "ostinato"
MODES = ["text/plain", "application/json"]


def card(base_url: str, agent: Skill | None, skills: Sequence[Skill], auth: AuthSettings) -> JSON:
    """The card of ``agent`` (``None``: the default agent) on a server at ``base_url``."""
    base = base_url.rstrip("/")
    url = f"{base}/a2a" if agent is None else f"{base}/a2a/{agent.id}"
    shown = list(skills) if agent is None else [agent]
    name = DEFAULT if agent is None else agent.label
    description = (
        "An ostinato agent: each message is a task in a conversation (the context), "
        "run with the agent's tools; approvals and questions are input-required."
        if agent is None
        else agent.description or f"The ostinato agent {agent.id}."
    )
    found: JSON = {
        "name": name,
        "description": description,
        "version": getattr(ostinato, "__version__", "0"),
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": VERSION}
        ],
        "capabilities": {"streaming": True, "pushNotifications": False},
        "defaultInputModes": MODES,
        "defaultOutputModes": MODES,
        "skills": [_skill(s) for s in shown],
        **_security(auth),
    }
    return found


def _skill(skill: Skill) -> JSON:
    return {
        "id": skill.id,
        "name": skill.label,
        "description": skill.description or f"The agent {skill.id}.",
        "tags": [skill.tier],
    }


def _security(auth: AuthSettings) -> JSON:
    schemes: JSON = {}
    if "keys" in auth.methods:
        schemes["apiKey"] = {
            "httpAuthSecurityScheme": {
                "scheme": "Bearer",
                "description": "An ostinato API key (`ostinato keys create`).",
            }
        }
    if "oidc" in auth.methods and auth.oidc is not None:
        issuer = auth.oidc.issuer.rstrip("/")
        schemes["oidc"] = {
            "openIdConnectSecurityScheme": {
                "openIdConnectUrl": f"{issuer}/.well-known/openid-configuration",
                "description": "An access token of the deployment's identity provider.",
            }
        }
    if not schemes:
        return {}
    requirements: list[JSON] = [{"schemes": {name: {"list": []}}} for name in schemes]
    return {"securitySchemes": schemes, "securityRequirements": requirements}
