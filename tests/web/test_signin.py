"""Signing in on the chat page, in Chromium, against ``ostinato serve`` in mode
``keys,oidc`` with a local identity provider (``tests/fakes/issuer.py``: discovery, an
authorization endpoint that sends the browser back with a code, a token endpoint that
checks PKCE and issues a JWT signed by a test key, JWKS): an API key given once becomes
a session cookie, signing out (in this tab or another) and a revoked key bring the
sign-in screen back, and signed out the page shows nothing of anyone's data."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.fakes.issuer import FakeIssuer, s256
from tests.web.conftest import shoot
from tests.web.provider import PageChat
from tests.web.site import CHROMIUM, CHROMIUM_ARGS, Site

SECRET = "a-test-secret-that-signs-the-cookies-0123456789"


@pytest.fixture(scope="module")
def issuer() -> Iterator[FakeIssuer]:
    with FakeIssuer(user="carol") as issuer:
        yield issuer


@pytest.fixture(scope="module")
def site(
    fake: PageChat, issuer: FakeIssuer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    env = {
        "OSTINATO_MODEL": "openai-chat:fake-model",
        "OPENAI_BASE_URL": f"{fake.url}/v1",
        "OPENAI_API_KEY": "k",
        "OSTINATO_AUTH__MODE": "keys,oidc",
        "OSTINATO_AUTH__SECRET": SECRET,
        "OSTINATO_AUTH__OIDC__ISSUER": issuer.url,
        "OSTINATO_AUTH__OIDC__AUDIENCE": issuer.audience,
        "OSTINATO_AUTH__OIDC__CLIENT_ID": issuer.client_id,
        "OSTINATO_AUTH__OIDC__SCOPES": "openid profile",
    }
    site = Site(tmp_path_factory.mktemp("signin"), env)
    site.start()
    yield site
    site.stop()


def signed_out(page: Any) -> None:
    """The sign-in screen, and nothing of anyone's data."""
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.get_by_role("navigation", name="Conversations")).to_have_count(0)
    expect(page.locator(".msg, .conversation-list li")).to_have_count(0)


def sign_in_with_key(page: Any, key: str) -> None:
    page.get_by_role("textbox", name="API key").fill(key)
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(page.get_by_role("navigation", name="Conversations")).to_be_visible()


def send(page: Any, text: str) -> None:
    box = page.get_by_role("textbox", name="Message")
    box.fill(text)
    box.press("Enter")


def test_a_key_signs_in_once_and_signing_out_shows_nothing(context: Any, site: Site) -> None:
    _, key = site.new_key("ann")
    cid = site.conversation("Ann's plans", key=key)
    site.api("POST", f"/v1/conversations/{cid}/turns", {"text": "/say secret plans"}, key=key)

    page = context.new_page()
    page.goto(f"{site.url}/c/{cid}")
    signed_out(page)
    expect(page.get_by_text("secret plans")).to_have_count(0)
    expect(page.get_by_role("textbox", name="API key")).to_be_visible()
    shoot(page, "signin")
    page.get_by_role("textbox", name="API key").fill(key + "x")
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(page.get_by_role("alert")).to_contain_text("not valid")
    signed_out(page)

    sign_in_with_key(page, key)
    expect(page.locator(".msg.assistant", has_text="secret plans")).to_be_visible()
    expect(page.get_by_role("link", name="Ann's plans", exact=True)).to_be_visible()
    expect(page.get_by_title("Signed in as")).to_have_text("ann")
    send(page, "/say sent through the session")  # a POST riding the cookie, with its CSRF token
    expect(page.locator(".msg.assistant", has_text="sent through the session")).to_be_visible()

    # the browser keeps a session cookie, never the key
    cookies = {c["name"]: c for c in context.cookies()}
    session = cookies["ostinato_session"]
    assert session["httpOnly"] and session["sameSite"] == "Strict"
    assert key not in str(cookies)
    stored = page.evaluate("JSON.stringify([{...localStorage}, {...sessionStorage}])")
    assert key.split("_", 2)[2] not in stored  # the whole secret (it may hold "_")

    page.reload()  # asked once: the cookie signs in again
    expect(page.locator(".msg.assistant", has_text="sent through the session")).to_be_visible()
    send(page, "/say after a reload")  # the CSRF token is found again
    expect(page.locator(".msg.assistant", has_text="after a reload")).to_be_visible()

    other = context.new_page()
    other.goto(f"{site.url}/c/{cid}")
    expect(other.locator(".msg.assistant", has_text="secret plans")).to_be_visible()
    page.get_by_role("button", name="Sign out").click()
    signed_out(page)
    expect(page.get_by_text("You signed out.")).to_be_visible()
    signed_out(other)  # the other tab follows
    page.reload()
    signed_out(page)
    assert "ostinato_session" not in {c["name"] for c in context.cookies()}


def test_revoking_the_key_ends_the_session(context: Any, site: Site) -> None:
    key_id, key = site.new_key("bob")
    cid = site.conversation("Bob's", key=key)
    page = context.new_page()
    page.goto(f"{site.url}/c/{cid}")
    sign_in_with_key(page, key)
    send(page, "/say before the revocation")
    expect(page.locator(".msg.assistant", has_text="before the revocation")).to_be_visible()
    site.keys("revoke", key_id)
    # the open stream is closed within stream_recheck_s, and the page signs out
    signed_out(page)
    expect(page.get_by_role("status")).to_contain_text(re.compile("revoked|expired"))
    page.reload()
    signed_out(page)
    page.get_by_role("textbox", name="API key").fill(key)
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(page.get_by_role("alert")).to_contain_text("not valid")


def test_the_identity_providers_code_flow_with_pkce(
    context: Any, site: Site, issuer: FakeIssuer
) -> None:
    page = context.new_page()
    page.goto(site.url + "/")
    signed_out(page)
    page.get_by_role("button", name=re.compile(r"^Sign in with 127\.0\.0\.1:")).click()
    # to the issuer and straight back with a code; the page trades it for a session
    expect(page.get_by_role("navigation", name="Conversations")).to_be_visible()
    expect(page.get_by_title("Signed in as")).to_have_text("oidc:carol")
    assert page.url == site.url + "/"  # the code left the address bar
    asked = issuer.authorized[-1]
    assert asked["code_challenge_method"] == "S256" and asked["scope"] == "openid profile"
    assert asked["redirect_uri"] == f"{site.url}/signin/callback"
    exchanged = issuer.exchanged[-1]
    assert s256(exchanged["code_verifier"]) == asked["code_challenge"]
    assert "access_token" not in page.evaluate("document.cookie")

    send(page, "/say hello carol")
    expect(page.locator(".msg.assistant", has_text="hello carol")).to_be_visible()
    cid = str(page.url.rsplit("/c/", 1)[1])
    token = issuer.token("carol")
    assert site.api("GET", f"/v1/conversations/{cid}", key=token)["owner"] == "oidc:carol"

    page.get_by_role("button", name="Sign out").click()
    signed_out(page)
    issuer.deny = True
    try:
        page.get_by_role("button", name=re.compile(r"^Sign in with ")).click()
        expect(page.get_by_role("status")).to_contain_text("the person said no")
        signed_out(page)
    finally:
        issuer.deny = False


def test_over_plain_http_elsewhere_the_page_says_it_needs_https(browser: Any, site: Site) -> None:
    """A name that is not loopback, over plain HTTP: the cookie is Secure, Chromium drops
    it, and the page says why instead of pretending to be signed in."""
    _, key = site.new_key("erin")
    rules = "--host-resolver-rules=MAP chat.example 127.0.0.1"
    elsewhere = browser.browser_type.launch(executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, rules])
    try:
        page = elsewhere.new_page()
        page.goto(f"http://chat.example:{site.port}/")
        page.get_by_role("textbox", name="API key").fill(key)
        page.get_by_role("button", name="Sign in", exact=True).click()
        expect(page.get_by_role("alert")).to_contain_text("serve this page over HTTPS")
        signed_out(page)
    finally:
        elsewhere.close()
