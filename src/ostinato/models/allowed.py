"""Which models a caller may choose on the operator's key.

A caller picks a model with the ``x-ostinato-model-id`` header, a conversation's
``model`` (``POST`` / ``PATCH /v1/conversations``) or the ``model`` of the
chat-completions endpoint. Each of those runs on the deployment's keys, so only what the
operator lists may be chosen (``models.choosable``; unset: the tier names, the ids the
tiers resolve to and the default model). Anything else is a 403 that lists what may be
chosen. A request that brings its own key (``x-ostinato-model-api-key``) pays for
itself: it may choose any model when the operator allows it
(``models.caller_key_chooses_any``); one that names its own server
(``x-ostinato-model-base-url``, where the operator allows that) is sent none of the
deployment's keys, so it is not bound by the list either. The agents the operator
configured are always choosable (they are chosen by ``persona`` or by name, not here).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ostinato.errors import ClientError
from ostinato.models.choice import Tiers


class ModelNotAllowed(ClientError):
    """The caller named a model this deployment does not let callers choose."""

    status = 403
    code = "model_not_allowed"

    def __init__(self, message: str, choosable: tuple[str, ...]) -> None:
        super().__init__(message)
        self.details = [{"choosable": list(choosable)}]


@dataclass(frozen=True, slots=True)
class ModelChoices:
    """The names a caller may choose (tiers as lower-case names, ``provider:model``
    ids as written) and whether a caller's own key lifts the list."""

    names: tuple[str, ...]
    tiers: Tiers
    own_key_lifts: bool = False

    @classmethod
    def of(
        cls,
        configured: Iterable[str] | None,
        tiers: Tiers,
        default_id: str,
        *,
        own_key_lifts: bool = False,
    ) -> ModelChoices:
        """``configured`` (``models.choosable``), or when it is ``None`` the tier names,
        the ids they resolve to and ``default_id``."""
        if configured is None:
            configured = [*tiers.mapping, *tiers.mapping.values(), default_id]
        names = [n.strip() if ":" in n else n.strip().lower() for n in configured if n.strip()]
        return cls(tuple(dict.fromkeys(names)), tiers, own_key_lifts)

    def allows(self, name: str, *, own_key: bool = False, own_server: bool = False) -> bool:
        """Whether ``name`` (a tier or an id) may be chosen: it is listed, or it is a tier
        whose id is listed (or an id a listed tier resolves to), or the caller brings a
        key and that lifts the list, or the caller names its own server (no key of the
        deployment's goes there)."""
        if own_server or (own_key and self.own_key_lifts):
            return True
        if ":" in name:  # listed, or what a listed tier resolves to
            model_id = name.strip()
            return model_id in self.names or any(
                self.tiers.mapping.get(n) == model_id for n in self.names
            )
        tier = name.strip().lower()
        return tier in self.names or self.tiers.mapping.get(tier) in self.names

    def check(self, name: str, *, own_key: bool = False, own_server: bool = False) -> None:
        """``ModelNotAllowed`` (403, listing the choices) unless ``allows``."""
        if self.allows(name, own_key=own_key, own_server=own_server):
            return
        listed = ", ".join(self.names) or "none"
        lift = (
            "; a request with its own key (x-ostinato-model-api-key) may choose any"
            if self.own_key_lifts
            else ""
        )
        raise ModelNotAllowed(
            f"callers may not choose the model {name[:100]!r} on this server; "
            f"choose one of: {listed}{lift}",
            self.names,
        )
