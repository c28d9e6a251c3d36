"""The page API (contract in the shared brief), served by every storage instance on its own port.

    GET /v1/page?url=U              latest metadata of U (404 when never stored)
    GET /v1/page/body?url=U         the latest body, raw bytes (`content_hash=H` for an older one)
    GET /v1/page/history?url=U      {"url", "history": [versions, oldest first]}
    GET /v1/storage/warcs           {"root", "files": [...]}, `crawl_id=C` for one crawl's files

Any instance answers: index lookups go through `storage.routing.PageRouter`; bodies and WARC
listings come from the shared `storage.root`. Errors are {"error": "..."} with a 4xx/5xx status.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Handler

from storage.blobs import BlobStore, is_sha256_hex
from storage.exceptions import BlobCorruptError
from storage.index import PageHistory, page_metadata
from storage.routing import FORWARDED_HEADER, IndexUnavailableError, PageRouter
from storage.warcfiles import is_open, warc_files


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as error:
        if error.status >= 400:
            return _error(error.status, error.reason)
        raise


class PageApi:
    def __init__(self, router: PageRouter, blobs: BlobStore) -> None:
        self._router = router
        self._blobs = blobs

    async def _history(self, request: web.Request) -> PageHistory | web.Response:
        url = request.query.get("url")
        if not url:
            return _error(400, "the url query parameter is required")
        try:
            history = await self._router.history(url, forwarded=FORWARDED_HEADER in request.headers)
        except IndexUnavailableError as error:
            return _error(503, str(error))
        if history is None or not history.versions:
            return _error(404, f"no page stored for {url}")
        return history

    async def page(self, request: web.Request) -> web.Response:
        history = await self._history(request)
        if isinstance(history, web.Response):
            return history
        return web.json_response(page_metadata(history))

    async def history(self, request: web.Request) -> web.Response:
        history = await self._history(request)
        if isinstance(history, web.Response):
            return history
        versions = [v.model_dump(mode="json") for v in history.versions]
        return web.json_response({"url": history.url, "history": versions})

    async def body(self, request: web.Request) -> web.Response:
        history = await self._history(request)
        if isinstance(history, web.Response):
            return history
        wanted = request.query.get("content_hash")
        if wanted is not None and not is_sha256_hex(wanted):
            return _error(400, "content_hash must be a lowercase sha256 hex digest")
        chosen = [v for v in history.versions if wanted is None or v.content_hash == wanted]
        if not chosen:
            return _error(404, f"{history.url} never had content {wanted}")
        version = chosen[-1]
        try:
            body = await asyncio.to_thread(self._blobs.read, version.content_hash)
        except FileNotFoundError:
            return _error(500, f"blob {version.blob} is missing from the storage root")
        except BlobCorruptError as error:
            return _error(500, str(error))
        return web.Response(
            body=body,
            headers={
                "Content-Type": version.content_type or "application/octet-stream",
                "X-Content-Hash": version.content_hash,
                "X-Fetched-At": str(version.last_fetched_at),
                "X-Status": str(version.status),
            },
        )

    async def warcs(self, request: web.Request) -> web.Response:
        crawl_id = request.query.get("crawl_id")
        root = self._blobs.root
        files = await asyncio.to_thread(_listing, root, crawl_id)
        return web.json_response({"root": str(root.resolve()), "files": files})


def _listing(root: Path, crawl_id: str | None) -> list[dict[str, object]]:
    return [
        {
            "path": path.relative_to(root).as_posix(),
            "crawl": path.parent.name,
            "bytes": path.stat().st_size,
            "open": is_open(path),
        }
        for path in warc_files(root, crawl_id)
    ]


def build_app(router: PageRouter, blobs: BlobStore) -> web.Application:
    api = PageApi(router, blobs)
    app = web.Application(middlewares=[json_errors])
    app.router.add_get("/v1/page", api.page)
    app.router.add_get("/v1/page/body", api.body)
    app.router.add_get("/v1/page/history", api.history)
    app.router.add_get("/v1/storage/warcs", api.warcs)
    return app
