"""``/docs``: Swagger UI served from the package's own copy of swagger-ui-dist (``api_gateway/static/swagger-ui``),
so the page works on a host with no internet access (no CDN)."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).parent / "static" / "swagger-ui"
ASSETS_PATH = "/docs-assets/swagger-ui"
DOCS_PATH = "/docs"
OAUTH2_REDIRECT_PATH = "/docs/oauth2-redirect"


def install_docs(app: FastAPI) -> None:
    """Serve Swagger UI at ``/docs`` with local assets (create the app with ``docs_url=None``)."""
    app.mount(ASSETS_PATH, StaticFiles(directory=STATIC_DIR), name="swagger-ui-assets")

    @app.get(DOCS_PATH, include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=app.openapi_url, title=f"{app.title} - API docs",
                                   swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
                                   swagger_favicon_url=f"{ASSETS_PATH}/favicon-32x32.png",
                                   oauth2_redirect_url=OAUTH2_REDIRECT_PATH)

    @app.get(OAUTH2_REDIRECT_PATH, include_in_schema=False)
    def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()
