"""``[auth]`` in ``ostinato.toml``: who may call, and how much each owner may do.

::

    [auth]
    mode = "keys"            # "none" (default), "keys", "oidc", or "keys,oidc"
    allow_anonymous = false  # callers without credentials get an anonymous owner
    secret = "..."           # signs cookies; give every server process the same one

    [auth.oidc]              # with mode "oidc"
    issuer = "https://accounts.example.com"
    audience = "ostinato"

    [auth.limits]            # per owner; 0 switches one off
    running_turns = 3

It is the ``auth`` section of ``ostinato.config``: environment variables override the
file (``OSTINATO_AUTH__MODE``, ``OSTINATO_AUTH__LIMITS__RUNNING_TURNS`` and the like).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode

from ostinato.identity.owners import OIDC_PREFIX

METHODS = ("keys", "oidc")
ASYMMETRIC = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class AnonymousLimits(_Section):
    """What anonymous callers may do all together (each is also bound as one owner), and
    how many anonymous owners one client address may be given; 0 switches one off."""

    running_turns: int = Field(
        default=3, ge=0, description="Turns of all anonymous callers running at once."
    )
    turns_per_minute: int = Field(
        default=10, ge=0, description="New turns of all anonymous callers in any 60 s."
    )
    open_streams: int = Field(
        default=5, ge=0, description="Event streams and WebSockets all anonymous callers hold."
    )
    new_per_minute: int = Field(
        default=5,
        ge=0,
        description="New anonymous owners one client address is given in any 60 s.",
    )


class LimitSettings(_Section):
    """What one owner may do at once or per minute. ``enabled`` None: on in every mode but
    ``none`` (one person on their own machine needs no protection from themselves)."""

    enabled: bool | None = Field(
        default=None, description="Limits on or off; unset: on in every mode but `none`."
    )
    running_turns: int = Field(
        default=3,
        ge=0,
        description="Turns of one owner running (or queued) at once; 0: no limit.",
    )
    turns_per_minute: int = Field(
        default=20,
        ge=0,
        description="New turns of one owner in any 60 s; 0: no limit.",
    )
    open_streams: int = Field(
        default=10,
        ge=0,
        description="Event streams and WebSockets one owner has open; 0: no limit.",
    )
    uploads_per_turn: int = Field(
        default=10,
        ge=0,
        description="Files attached to one message; 0: no limit.",
    )
    anonymous: AnonymousLimits = Field(
        default_factory=AnonymousLimits,
        description="Anonymous callers as a group ([auth.limits.anonymous]).",
    )


class OidcSettings(_Section):
    """An OpenID Connect issuer whose JWT access tokens the server accepts."""

    issuer: str = Field(min_length=1, description="The `iss` every token must carry.")
    audience: Annotated[list[str], NoDecode] = Field(
        min_length=1, description="Accepted `aud` values (any one; comma-separated)."
    )
    jwks_url: str | None = Field(
        default=None, description="Where the signing keys are; None: the issuer's discovery."
    )
    owner_claim: str = Field(
        default="sub",
        min_length=1,
        description="The claim that names the owner: one the issuer never reassigns "
        "(`sub`), not one a person can change (`preferred_username`, `email`).",
    )
    owner_prefix: str | None = Field(
        default=None,
        description="Put before every owner a token names, so it cannot be an API key's "
        "owner; unset: `oidc:` in mode `keys,oidc`, nothing in mode `oidc`.",
    )
    algorithms: list[str] = Field(
        default_factory=lambda: list(ASYMMETRIC),
        min_length=1,
        description="Accepted signature algorithms (public-key ones only).",
    )
    leeway_s: float = Field(default=30.0, ge=0, le=300, description="Clock skew allowed.")
    jwks_cache_s: float = Field(default=600.0, gt=0, description="Refetch keys this often.")
    # signing in on the chat page (the authorization code flow with PKCE)
    client_id: str | None = Field(
        default=None,
        min_length=1,
        description="The chat page's client id at the issuer; unset: no sign-in on the page.",
    )
    client_secret: SecretStr | None = Field(
        default=None,
        description="The client's secret, for a confidential client (unset: a public one).",
    )
    redirect_uri: str | None = Field(
        default=None,
        pattern=r"^https?://[^/?#]+/",
        description="Where the issuer sends the browser back; unset: the page's "
        "`<origin>/signin/callback`. Register it with the issuer.",
    )
    scopes: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["openid"],
        min_length=1,
        description="Scopes the page asks for (comma-separated).",
    )
    authorize_params: dict[str, str] = Field(
        default_factory=dict,
        description="Extra parameters of the authorization request, e.g. Auth0's "
        "`audience` (a JSON object in the environment).",
    )

    @field_validator("audience", mode="before")
    @classmethod
    def _one_or_more(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("scopes", mode="before")
    @classmethod
    def _scopes(cls, value: Any) -> Any:
        if isinstance(value, str):  # OAuth writes them space-separated; commas work too
            return value.replace(",", " ").split()
        return value

    @field_validator("algorithms")
    @classmethod
    def _asymmetric(cls, value: list[str]) -> list[str]:
        refused = [a for a in value if a not in ASYMMETRIC]
        if refused:
            raise ValueError(
                f"only public-key algorithms are accepted ({', '.join(ASYMMETRIC)}), "
                f"not {', '.join(refused)}"
            )
        return value


class AuthSettings(_Section):
    mode: str = Field(
        default="none",
        description="Who may call: `none` (everyone is the local owner), `keys`, `oidc` or "
        "`keys,oidc` (see docs/auth.md).",
    )
    allow_anonymous: bool = Field(
        default=False,
        description="Callers without credentials get an anonymous owner of their own.",
    )
    secret: SecretStr | None = Field(
        default=None,
        description="Signs cookies and CSRF tokens; the same in every process (unset: a "
        "random one per process).",
    )
    cookie_secure: bool = Field(
        default=True,
        description="Cookies marked `Secure` (HTTPS only) except on a loopback address "
        "over plain HTTP; false: only when the request came over HTTPS.",
    )
    session_s: float = Field(
        default=7 * 86_400,
        gt=0,
        le=400 * 86_400,
        description="How long a sign-in on the chat page lasts (its session cookie).",
    )
    key_cache_s: float = Field(
        default=1.0, ge=0, le=60, description="How long a key read from the store is trusted."
    )
    stream_recheck_s: float = Field(
        default=2.0, gt=0, le=60, description="How often open streams re-check credentials."
    )
    oidc: OidcSettings | None = Field(
        default=None, description="The identity provider, for mode `oidc` ([auth.oidc])."
    )
    limits: LimitSettings = Field(default_factory=LimitSettings)
    admins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Owners who may use the admin routes (`/v1/admin/...`: every owner's "
        "usage, reloading the configuration; comma-separated). In mode `none` the local "
        "owner may.",
    )

    @field_validator("admins", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    def admin(self, owner: str, method: str) -> bool:
        """Whether a caller (its owner, and how it was established) may use the admin
        routes: the local owner of mode ``none``, or an owner ``admins`` names who signed
        in with a key or a token (never an anonymous caller)."""
        if method == "local":
            return True
        return method in ("key", "oidc") and owner in self.admins

    @field_validator("mode")
    @classmethod
    def _mode(cls, value: str) -> str:
        parts = {p.strip().lower() for p in value.replace("+", ",").split(",") if p.strip()}
        if parts == {"none"}:
            return "none"
        unknown = parts - set(METHODS)
        if unknown or not parts:
            raise ValueError(f'mode is "none", "keys", "oidc" or "keys,oidc", not {value!r}')
        return ",".join(m for m in METHODS if m in parts)

    @model_validator(mode="after")
    def _oidc_configured(self) -> AuthSettings:
        if "oidc" in self.methods and self.oidc is None:
            raise ValueError("mode oidc needs an [auth.oidc] section (issuer, audience)")
        return self

    @model_validator(mode="after")
    def _owners_apart(self) -> AuthSettings:
        if {"keys", "oidc"} <= self.methods and self.oidc and self.oidc.owner_prefix == "":
            raise ValueError(
                "mode keys,oidc needs auth.oidc.owner_prefix (or leave it unset: 'oidc:'), "
                "or a token's owner could be an API key's owner"
            )
        return self

    @property
    def oidc_owner_prefix(self) -> str:
        """What goes before a token's owner (``OidcSettings.owner_prefix``)."""
        if self.oidc is not None and self.oidc.owner_prefix is not None:
            return self.oidc.owner_prefix
        return OIDC_PREFIX if "keys" in self.methods else ""

    @property
    def methods(self) -> frozenset[str]:
        """The ways a caller may prove who it is: ``keys``, ``oidc`` (empty in ``none``)."""
        return frozenset() if self.mode == "none" else frozenset(self.mode.split(","))

    @property
    def limits_on(self) -> bool:
        return self.limits.enabled if self.limits.enabled is not None else self.mode != "none"
