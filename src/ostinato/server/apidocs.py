"""``/docs``: the browsable API page, Swagger UI served from the package, never a CDN.

FastAPI's own page loads Swagger UI's script and style from a CDN, so it is blank on a
machine without the internet. Here they come from ``swagger-ui-bundle-v2`` (Swagger UI's
released files, pinned in ``pyproject.toml``), mounted under ``/docs/assets``; Swagger
UI's online validator badge is switched off, so the page asks no other host for
anything. (FastAPI's ReDoc page, which also loads from a CDN, is not offered.)
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

from ostinato.server.openapi import install_openapi

ASSETS = "/docs/assets"


def install_docs(app: FastAPI) -> None:
    """Serve the OpenAPI document (``ostinato.server.openapi``) and ``/docs`` (and its
    OAuth2 redirect page) with local assets. The app must be made with ``docs_url=None``
    and ``redoc_url=None``."""
    install_openapi(app)
    title = app.title
    app.mount(ASSETS, StaticFiles(directory=str(swagger_ui_path)), name="swagger-ui")
    redirect = "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{title} - API",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
            oauth2_redirect_url=redirect,
            swagger_ui_parameters={"validatorUrl": None},
        )

    @app.get(redirect, include_in_schema=False)
    async def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()
