"""What one fetch is asked to do and what came of it, and how that becomes schema messages.

A :class:`FetchTarget` is the part of a FetchRequest that the HTTP layer needs, so robots.txt
fetches use the same path. A :class:`FetchResult` holds everything learned, kind decided: the
service turns it into a FetchedPage (for ``done``; a bodiless revisit for ``unchanged``) and one
FetchOutcome per lease (DESIGN.md section 3, step 4).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fetcher.errors import Failure
from fetcher.wire import OutcomeFields, PageFields
from schemas.base import SCHEMA_VERSION, now_millis
from schemas.fetch import FetchRequest
from schemas.outcomes import FetchOutcome, OutcomeKind
from schemas.pages import FetchedPage

SentHook = Callable[[], None]
"""Called once a request's headers have been handed to the socket, so politeness can count the
request's start from then (`fetcher.politeness.Politeness.mark_sent`)."""

Body = bytes | bytearray
"""A fetched body: the bytearray the fetch decoded into, handed on without a copy."""


@dataclass(slots=True)
class FetchTarget:
    """One URL to fetch and what the response must satisfy; not changed once made (not frozen
    only because a frozen dataclass sets each field through ``object.__setattr__``, four times
    the cost of a plain one, and every fetch makes one of these and one FetchResult)."""

    url: str
    content_types: tuple[str, ...] = ()
    """Accepted media types (``text/html``, ``text/*``, ``*/*``); empty accepts any."""
    etag: str | None = None
    last_modified: str | None = None
    content_hash: str | None = None
    """sha256 hex of the body fetched last time: the same body again is ``unchanged``."""
    deadline_ms: int | None = None
    """Epoch milliseconds after which the result is useless (the lease deadline)."""
    headers: Mapping[str, str] | None = None
    """The crawl's own request headers, sent with the fetcher's."""
    cookie_jar: str | None = None
    """The crawl whose cookies the fetch sends and keeps (`fetcher.cookies`); None: no cookies."""
    check_only: bool = False
    """Only the status is wanted: a 2xx is done once its headers arrive, its body never read."""
    on_sent: SentHook | None = field(default=None, compare=False, repr=False)
    """Called when the request's headers have been written (never when it got no further)."""

    @classmethod
    def from_request(cls, request: FetchRequest, on_sent: SentHook | None = None) -> FetchTarget:
        return cls(
            url=request.url,
            content_types=tuple(request.content_types),
            etag=request.etag,
            last_modified=request.last_modified,
            content_hash=request.content_hash,
            deadline_ms=request.deadline,
            headers=request.headers,
            cookie_jar=request.crawl_id if request.use_cookies else None,
            check_only=request.check_only,
            on_sent=on_sent,
        )


@dataclass(slots=True)
class FetchResult:
    """The result of one fetch; ``failure`` is set exactly when kind is retryable or permanent.
    Not changed once :func:`fetcher.http.fetch` returned it (not frozen: see FetchTarget)."""

    url: str
    kind: OutcomeKind
    fetched_at_ms: int
    """Epoch milliseconds when the fetch started."""
    elapsed_s: float
    status: int | None = None
    failure: Failure | None = None
    redirect_to: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    content_type: str | None = None
    """The media type, lowercase and without parameters."""
    body: Body = b""
    """Decoded body bytes; a bytearray nobody writes to once the fetch returned."""
    sha256: str | None = None
    truncated: bool = False
    wire_bytes: int = 0
    """Bytes of body read from the connection, before decoding."""
    etag: str | None = None
    last_modified: str | None = None
    answered_at: float | None = None
    """Monotonic time (the fetch's clock) the response's status and headers were read; None when
    none came. The server saw the request before then, so politeness counts the next gap from
    no earlier than this (`fetcher.politeness.Politeness.release`)."""

    @property
    def retry_after_s(self) -> float | None:
        return None if self.failure is None else self.failure.retry_after_s

    def page(self, request: FetchRequest) -> FetchedPage | None:
        """The page for `pages` (its body travels beside it), or None when there is none. An
        unchanged recrawl gives a `revisit` page, whose body is not sent; a 304 to a request that
        named no content hash gives none, since there is nothing to point a revisit at."""
        fields = self.page_fields(request)
        return None if fields is None else FetchedPage.model_validate(fields)

    def outcome(
        self, request: FetchRequest, *, page_sent: bool, sitemaps: Sequence[str] = ()
    ) -> FetchOutcome:
        """The lease's terminal outcome. Its redirect hops are the request's (the frontier counts a
        redirect when it follows it); a 304 keeps the request's content hash, since the content
        is the one it describes."""
        return FetchOutcome.model_validate(
            self.outcome_fields(request, page_sent=page_sent, sitemaps=sitemaps)
        )

    def page_fields(self, request: FetchRequest) -> PageFields | None:
        """:meth:`page` as the fields `fetcher.wire` writes (the service's path)."""
        status = self.status
        if status is None:
            return None
        if self.kind == "unchanged":
            content_hash = self.sha256 or request.content_hash
            if content_hash is None:
                return None
            return self._page(request, status, content_hash, body_size=0, revisit=True)
        if self.kind != "done" or self.sha256 is None:
            return None
        return self._page(request, status, self.sha256, body_size=len(self.body), revisit=False)

    def _page(
        self, request: FetchRequest, status: int, sha256: str, *, body_size: int, revisit: bool
    ) -> PageFields:
        fields: PageFields = {
            "v": SCHEMA_VERSION,
            "crawl_id": request.crawl_id,
            "url": request.url,
            "final_url": self.url,
            "lease_id": request.lease_id,
            "depth": request.depth,
            "status": status,
            "headers": dict(self.headers),
            "content_type": self.content_type,
            "body_size": body_size,
            "sha256": sha256,
            "truncated": self.truncated and not revisit,
            "fetched_at": self.fetched_at_ms,
            "elapsed_ms": round(self.elapsed_s * 1000),
            "follow_nofollow": request.follow_nofollow,
            "revisit": revisit,
        }
        if request.extract is not None and not revisit:
            fields["extract"] = {"v": SCHEMA_VERSION, "fields": request.extract.fields}
        if request.follow_within is not None and not revisit:
            fields["follow_within"] = request.follow_within
        if request.redirect_hops and not revisit:
            fields["redirect_hops"] = request.redirect_hops
        if request.use_feeds and not revisit:
            fields["use_feeds"] = True
        if request.find_requisites and not revisit:
            fields["find_requisites"] = True
        if request.sign_text and not revisit:
            fields["sign_text"] = True
        return fields

    def outcome_fields(
        self, request: FetchRequest, *, page_sent: bool, sitemaps: Sequence[str] = ()
    ) -> OutcomeFields:
        """:meth:`outcome` as the fields `fetcher.wire` writes (the service's path)."""
        retry_after = self.retry_after_s
        failure = self.failure
        fields: OutcomeFields = {
            "v": SCHEMA_VERSION,
            "crawl_id": request.crawl_id,
            "url": request.url,
            "host": request.host,
            "lease_id": request.lease_id,
            "depth": request.depth,
            "kind": self.kind,
            "status": self.status,
            "redirect_to": self.redirect_to,
            "redirect_hops": request.redirect_hops,
            "error": None if failure is None else failure.message(),
            "reason": None if failure is None else failure.reason.value,
            "truncated": self.truncated,
            "retry_after_ms": None if retry_after is None else round(retry_after * 1000),
            "page_sent": page_sent,
            "sitemaps": list(sitemaps),
            "etag": self.etag,
            "last_modified": self.last_modified,
            "content_hash": self.sha256
            or (request.content_hash if self.kind == "unchanged" else None),
            "fetched_at": self.fetched_at_ms,
            "elapsed_ms": round(self.elapsed_s * 1000),
        }
        if self.content_type:
            fields["content_type"] = self.content_type
        if self.sha256 is not None:
            fields["body_size"] = len(self.body)
        return fields


def robots_denied_outcome(
    request: FetchRequest, sitemaps: tuple[str, ...] | list[str]
) -> FetchOutcome:
    """robots.txt disallows the URL: nothing was fetched; a seed's outcome carries the Sitemap
    lines."""
    return _unfetched(
        request,
        kind="robots_denied",
        reason="robots_denied",
        sitemaps=list(sitemaps) if request.depth == 0 else [],
    )


def robots_unreachable_outcome(
    request: FetchRequest, failure: Failure, retry_after_s: float
) -> FetchOutcome:
    """robots.txt could not be read, so nothing of its origin is fetched (RFC 9309 2.3.1.4).
    That is no verdict on the URL: it is retried once robots.txt is asked for again
    (``retry_after_s``, when the unreachable rules expire), and fails for good only when the
    failure will not change (a host that does not resolve, a blocked address)."""
    return _unfetched(
        request,
        kind=failure.kind,
        error=f"robots.txt unreachable: {failure.message()}"[:500],
        reason=failure.reason.value,
        retry_after_ms=None if failure.kind == "permanent" else round(max(retry_after_s, 0) * 1000),
    )


def internal_error_outcome(request: FetchRequest) -> FetchOutcome:
    """The fetcher failed for a reason of its own (a bug): retryable, so the URL is not lost."""
    return _unfetched(
        request,
        kind="retryable",
        reason="internal_error",
        error="the fetcher failed unexpectedly; see its log",
    )


def _unfetched(request: FetchRequest, **fields: Any) -> FetchOutcome:
    """The outcome of a request that fetched nothing: its coordinates, now, and ``fields``."""
    return FetchOutcome(
        crawl_id=request.crawl_id,
        url=request.url,
        host=request.host,
        lease_id=request.lease_id,
        depth=request.depth,
        fetched_at=now_millis(),
        **fields,
    )
