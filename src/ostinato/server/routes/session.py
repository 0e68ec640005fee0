"""``/v1/session``: signing in and out on the chat page (``server.auth.signin``).

``GET`` says which ways to sign in this server offers; ``POST`` takes an API key, or an
authorization code with its PKCE verifier, and answers with a session cookie
(``HttpOnly``, ``SameSite=Strict``, ``Secure`` over HTTPS) and the CSRF token that the
page's state-changing requests then carry; ``DELETE`` makes the browser forget it.

These are public paths: a person signing in has no caller yet. Browsers' requests from
other sites are refused before they get here (``auth.middleware``), and nothing here
reads or changes anyone's data.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Body, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from ostinato.server.auth import signin
from ostinato.server.auth.authenticator import Unauthorized
from ostinato.server.auth.caller import Caller
from ostinato.server.auth.cookies import Session
from ostinato.server.auth.failures import KeysUnavailable
from ostinato.server.context import Context
from ostinato.server.errors import error_response, log
from ostinato.server.routes.caller import CallerOut

router = APIRouter(prefix="/v1", tags=["service"])

PKCE_VERIFIER = r"^[A-Za-z0-9._~-]{43,128}$"  # RFC 7636, section 4.1


class OidcOfferOut(BaseModel):
    authorization_endpoint: str = Field(description="Where the page sends the person.")
    client_id: str
    redirect_uri: str | None = Field(
        description="Where the issuer sends the browser back (null: the page's own "
        "`/signin/callback`)."
    )
    scope: str = Field(description="Space-separated scopes to ask for.")
    params: dict[str, str] = Field(description="More parameters of the authorization request.")


class SignInOptions(BaseModel):
    methods: list[Literal["keys", "oidc"]] = Field(
        description="Ways to sign in on the page: `keys` (an API key), `oidc` (the issuer)."
    )
    anonymous: bool = Field(description="Whether the page can be used without signing in.")
    oidc: OidcOfferOut | None = None
    problem: str | None = Field(
        default=None, description="Why a configured way to sign in is not offered right now."
    )


class KeySignIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, max_length=500, description="An API key (`ost_...`).")


class CodeSignIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str = Field(min_length=1, max_length=4096, description="The issuer's code.")
    code_verifier: str = Field(pattern=PKCE_VERIFIER, description="The PKCE verifier.")
    redirect_uri: str = Field(
        pattern=r"^https?://[^/?#]+/[^\x00-\x20]*$",
        max_length=2000,
        description="The redirect URI the authorization request named.",
    )


@router.get("/session", response_model=SignInOptions)
async def sign_in_options(context: Context) -> SignInOptions:
    """How a person can sign in on the chat page (a public path)."""
    offer = await signin.offered(context.auth)
    oidc = None
    if offer.oidc is not None:
        o = offer.oidc
        oidc = OidcOfferOut(
            authorization_endpoint=o.authorization_endpoint,
            client_id=o.client_id,
            redirect_uri=o.redirect_uri,
            scope=o.scope,
            params=o.params,
        )
    return SignInOptions(
        methods=list(offer.methods), anonymous=offer.anonymous, oidc=oidc, problem=offer.problem
    )


@router.post(
    "/session",
    response_model=CallerOut,
    responses={401: {"description": "The key or the code is refused."}},
)
async def sign_in(
    context: Context,
    request: Request,
    proof: Annotated[KeySignIn | CodeSignIn, Body()],
) -> Response:
    """Sign in with an API key, or with an authorization code and its PKCE verifier; the
    answer sets the session cookie (a public path)."""
    auth = context.auth
    caller: Caller
    session: Session
    try:
        if isinstance(proof, KeySignIn):
            caller = await auth.sign_in_with_key(proof.key)
            session = signin.with_key(auth, caller)
        else:
            caller, session = await signin.with_code(
                auth, proof.code, proof.code_verifier, proof.redirect_uri
            )
    except Unauthorized as exc:
        return error_response(401, "unauthorized", exc.message)
    except KeysUnavailable as exc:
        log.warning("a sign-in failed: %s", exc)
        return error_response(503, "unavailable", str(exc))
    body = CallerOut(
        owner=caller.owner,
        method=caller.method,
        anonymous=False,
        csrf_token=auth.cookies.csrf_token(caller.owner),
    )
    response = JSONResponse(body.model_dump())
    secure = auth.secure_for(request)
    for name, value in auth.cookies.session_headers(session, caller.owner, secure=secure):
        response.raw_headers.append((name, value))
    return response


@router.delete("/session", status_code=204)
async def sign_out(context: Context, request: Request) -> Response:
    """Sign out: the browser forgets its session cookie (a public path)."""
    response = Response(status_code=204)
    secure = context.auth.secure_for(request)
    for name, value in context.auth.cookies.end_session_headers(secure=secure):
        response.raw_headers.append((name, value))
    return response
