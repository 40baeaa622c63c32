"""``/docs`` works offline: Swagger UI's assets are served by the gateway itself (no CDN), and they ship in the
installed package (pyproject package-data)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest

from api_gateway.docs_ui import STATIC_DIR

ROOT = Path(__file__).resolve().parents[2]
CONTENT_TYPES = {".js": ("text/javascript", "application/javascript"), ".css": ("text/css",),
                 ".png": ("image/png",)}


class _Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.urls += [value for name, value in attrs if name in ("src", "href") and value]


def _asset_urls(html: str) -> list[str]:
    parser = _Refs()
    parser.feed(html)
    return parser.urls


def test_docs_page_references_only_local_assets_that_are_served(api):
    r = api.get("/docs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "cdn" not in r.text.lower() and "https://" not in r.text and "http://" not in r.text
    urls = _asset_urls(r.text)
    assert {Path(u).suffix for u in urls} == {".js", ".css", ".png"}, urls
    for url in urls:
        assert url.startswith("/") and not url.startswith("//"), url
        asset = api.get(url)
        assert asset.status_code == 200, url
        assert asset.headers["content-type"].split(";")[0] in CONTENT_TYPES[Path(url).suffix], (url, asset.headers)
        assert len(asset.content) > 100
    assert "SwaggerUIBundle" in api.get(next(u for u in urls if u.endswith(".js"))).text
    assert api.get("/openapi.json").status_code == 200
    assert api.get("/redoc").status_code == 404  # ReDoc would load its bundle from a CDN


def test_swagger_assets_are_package_data():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["api_gateway"]
    package = ROOT / "api_gateway"
    shipped = {p.resolve() for pattern in patterns for p in package.glob(pattern)}
    for name in ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png", "LICENSE"):
        assert (STATIC_DIR / name).resolve() in shipped, name


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(not CHROMIUM, reason="chromium not installed (Debian: apt-get install chromium; CI installs it)")
def test_docs_page_renders_the_api_in_a_real_browser(live, tmp_path):
    """Headless Chromium loads /docs from the live gateway (this machine has no internet: a CDN asset would not
    load) and Swagger UI renders an operation block for every documented path."""
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path}",
                           "--virtual-time-budget=20000", "--dump-dom", f"{live.url}/docs"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rendered = set(re.findall(r'class="opblock-summary-path" data-path="([^"]+)"', done.stdout))
    paths = set(httpx.get(f"{live.url}/openapi.json", timeout=30).json()["paths"])
    assert "/v1/documents" in rendered and rendered == paths
