"""``/ui``: the graph explorer, a static page (plain JS, no build step) served from the package's own files
(``api_gateway/ui``, with a vendored Cytoscape.js), so it works on a host with no internet access.

The page holds no server-side state: it calls the public API with the tenant's API key (kept in the browser's
sessionStorage), exactly as any other client would."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

UI_DIR = Path(__file__).resolve().parent.parent / "ui"
ASSETS_PATH = "/ui/assets"

# Only this gateway: no inline script, no other origin (the API key must never leave for a third party).
PAGE_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self' data:; "
                               "style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

router = APIRouter(include_in_schema=False)


@router.get("/ui")
@router.get("/ui/")
def explorer() -> FileResponse:
    return FileResponse(UI_DIR / "index.html", media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)


def install_ui(app: FastAPI) -> None:
    app.mount(ASSETS_PATH, StaticFiles(directory=UI_DIR), name="ui-assets")
    app.include_router(router)
