"""robots.txt: fetched once per origin, cached with a TTL, parsed with Protego (RFC 9309).

Rules are per origin (scheme, host and port, RFC 9309 section 2.3), fetched through the same safe
session as pages (`fetcher.http.fetch`), and the verdict follows RFC 9309 and Google's documented
behaviour:

- 2xx: the first ``max_bytes`` (500 KiB) are parsed, cut back to the last complete line; bytes
  are read as UTF-8, a BOM dropped, invalid sequences replaced.
- 3xx: up to ``max_redirects`` (5) redirects are followed, to any http(s) origin; a longer chain
  counts as "not found" (Google does the same), so everything is allowed.
- 4xx other than 429: no robots.txt, everything allowed, kept for the full TTL (24 h).
- 429, 5xx, timeouts, network errors and refused addresses: everything disallowed, and the file is
  asked for again after ``error_ttl_s`` (30 min), so a broken server is never read as "allow".
  Such rules are *unreachable* (:attr:`RobotsRules.failure` says why): the URLs they hold back
  are not denied but postponed until the file is asked for again (`fetcher.results`), or failed
  for good when the failure is (a host that does not resolve, a blocked address).

Crawl-delay for the configured user-agent token is exposed capped at 60 s, Sitemap lines resolved
against the robots.txt URL. A robots.txt fetch is a request to the host like any other: when
:meth:`RobotsCache.cached` has nothing, the caller spends the grant it popped for a page on
:meth:`RobotsCache.fetch_rules`, releases it with ``rules.status``, puts the page request back
(`HostQueues.requeue`) and waits for another grant. A URL the rules deny gives its grant back
unused (`Politeness.cancel`). Concurrent callers for one origin share a fetch.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Annotated, Literal

from protego import Protego
from pydantic import BaseModel, ConfigDict, Field

from fetcher import metrics
from fetcher.errors import Failure, Reason, retryable
from fetcher.http import FetchLimits, FetchSession, fetch
from fetcher.results import FetchResult, FetchTarget, SentHook
from fetcher.urls import origin
from schemas.canonical import canonical_url
from streamcrawl.clock import Clock

KIB = 1024

RobotsFetch = Callable[[FetchTarget], Awaitable[FetchResult]]
"""Fetches one URL without following redirects: :func:`fetcher.http.fetch` with its session."""
HopPacer = Callable[[], Awaitable[None]]
"""Awaited before each redirect hop of a robots.txt fetch: the hop is one more request to the
host, so the caller's politeness spaces it from the one before."""


class RobotsSettings(BaseModel):
    """How robots.txt is obeyed and cached."""

    model_config = ConfigDict(frozen=True)

    user_agent_token: Annotated[str, Field(pattern=r"^[A-Za-z_-]+$")] = "streamcrawl"
    """The product token matched against User-agent lines (RFC 9309 2.2.1: letters, _ and -)."""
    ttl_s: Annotated[float, Field(gt=0)] = 24 * 3600.0
    error_ttl_s: Annotated[float, Field(gt=0)] = 30 * 60.0
    """How soon a robots.txt that could not be read is asked for again."""
    max_redirects: Annotated[int, Field(ge=0, le=20)] = 5
    max_bytes: Annotated[int, Field(ge=1 * KIB)] = 500 * KIB
    crawl_delay_cap_s: Annotated[float, Field(ge=0)] = 60.0
    timeout_s: Annotated[float, Field(gt=0)] = 30.0
    """Total deadline of one robots.txt fetch (each redirect hop has its own)."""
    max_origins: Annotated[int, Field(gt=0)] = 100_000
    """Cached origins; the least recently fetched are forgotten first."""
    max_sitemaps: Annotated[int, Field(ge=0)] = 1000


Verdict = Literal["parsed", "allow_all", "disallow_all"]


@dataclass(frozen=True)
class RobotsRules:
    """What one origin's robots.txt says for our user-agent token, and until when it holds."""

    origin: str
    verdict: Verdict
    expires_at: float
    """Monotonic seconds after which the file must be fetched again."""
    user_agent: str
    status: int | None = None
    """The last HTTP status of the fetch (None: no response), for politeness feedback."""
    reason: str = ""
    """Why there are no parsed rules (``http 404``, ``timeout: ...``), for logs."""
    failure: Failure | None = None
    """Why robots.txt could not be read, for ``disallow_all`` rules only (RFC 9309 2.3.1.4)."""
    crawl_delay_s: float | None = None
    sitemaps: tuple[str, ...] = ()
    parser: Protego | None = field(default=None, repr=False, compare=False)

    def allows(self, url: str) -> bool:
        """Whether our user agent may fetch ``url`` (an URL of this origin)."""
        if self.verdict == "allow_all":
            return True
        if self.verdict == "disallow_all" or self.parser is None:
            return False
        return bool(self.parser.can_fetch(url, self.user_agent))


def robots_origin(url: str) -> str | None:
    """``scheme://host[:port]`` of an http(s) URL, the key robots.txt rules are stored by
    (`fetcher.urls.origin`: asked once per request, so cached by the URL's start)."""
    return origin(url)


class RobotsCache:
    """robots.txt rules per origin, fetched on demand and kept until they expire."""

    def __init__(self, settings: RobotsSettings, fetch_robots: RobotsFetch, clock: Clock) -> None:
        self._settings = settings
        self._fetch = fetch_robots
        self._clock = clock
        self._rules: OrderedDict[str, RobotsRules] = OrderedDict()
        self._pending: dict[str, asyncio.Task[RobotsRules]] = {}

    @classmethod
    def from_session(
        cls,
        settings: RobotsSettings,
        session: FetchSession,
        limits: FetchLimits,
        clock: Clock,
    ) -> RobotsCache:
        """A cache fetching through the fetcher's session, with robots.txt's own size cap, each
        attempt counted in `fetcher.metrics`."""
        robots_limits = limits.model_copy(
            update={
                "max_body_bytes": min(settings.max_bytes, limits.max_body_bytes),
                "max_wire_bytes": settings.max_bytes,
                "truncate_oversized": True,
                "total_timeout_s": settings.timeout_s,
            }
        )

        async def fetch_robots(target: FetchTarget) -> FetchResult:
            fetching = fetch(session, target, robots_limits, clock)
            return await metrics.counted(fetching, metrics.ROBOTS_TXT)

        return cls(settings, fetch_robots, clock)

    def cached(self, url: str) -> RobotsRules | None:
        """The unexpired rules for ``url``'s origin, or None when a fetch is due."""
        origin = robots_origin(url)
        rules = None if origin is None else self._rules.get(origin)
        if rules is None or rules.expires_at <= self._clock.monotonic():
            return None
        return rules

    async def rules_for(self, url: str) -> RobotsRules:
        """Cached rules, or fetched ones when there are none (the caller owns politeness)."""
        return self.cached(url) or await self.fetch_rules(url)

    async def fetch_rules(
        self, url: str, on_sent: SentHook | None = None, pace: HopPacer | None = None
    ) -> RobotsRules:
        """Fetch ``url``'s origin's robots.txt now (joining a fetch already under way, whose
        caller's ``on_sent`` and ``pace`` are the ones called)."""
        origin = robots_origin(url)
        if origin is None:
            raise ValueError(f"no http(s) origin in {url[:200]!r}")
        task = self._pending.get(origin)
        if task is None:
            fetching = self._fetch_and_store(origin, on_sent, pace)
            task = asyncio.get_running_loop().create_task(fetching)
            self._pending[origin] = task
            task.add_done_callback(lambda _: self._pending.pop(origin, None))
        return await asyncio.shield(task)

    async def close(self) -> None:
        """Cancel fetches under way (service shutdown)."""
        tasks = list(self._pending.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _fetch_and_store(
        self, origin: str, on_sent: SentHook | None, pace: HopPacer | None
    ) -> RobotsRules:
        rules = await self._fetch_rules(origin, on_sent, pace)
        self._rules[origin] = rules
        self._rules.move_to_end(origin)
        while len(self._rules) > self._settings.max_origins:
            self._rules.popitem(last=False)
        return rules

    async def _fetch_rules(
        self, origin: str, on_sent: SentHook | None, pace: HopPacer | None
    ) -> RobotsRules:
        url = f"{origin}/robots.txt"
        for hop in range(self._settings.max_redirects + 1):
            if hop and pace is not None:
                await pace()
            result = await self._fetch(FetchTarget(url=url, on_sent=on_sent))
            if result.kind != "redirect" or result.redirect_to is None:
                return self._rules_from(origin, url, result)
            url = result.redirect_to
        reason = f"more than {self._settings.max_redirects} redirects"
        return replace(self._unavailable(origin, reason), status=result.status)

    def _rules_from(self, origin: str, url: str, result: FetchResult) -> RobotsRules:
        status = result.status
        if result.kind in ("done", "unchanged"):
            rules = self._parsed(origin, url, result)
        elif status is not None and 400 <= status < 500 and status != 429:
            rules = self._unavailable(origin, f"http {status}")
        else:
            failure = result.failure or retryable(Reason.BAD_RESPONSE, f"{result.kind} {status}")
            rules = self._unreachable(origin, failure)
        return replace(rules, status=status)

    def _parsed(self, origin: str, url: str, result: FetchResult) -> RobotsRules:
        body = result.body
        if result.truncated:
            body = body[: body.rfind(b"\n") + 1]
        parser = Protego.parse(body.decode("utf-8", errors="replace").removeprefix("\ufeff"))
        token = self._settings.user_agent_token
        delay = parser.crawl_delay(token)
        sitemaps = dict.fromkeys(
            canonical
            for line in parser.sitemaps
            if (canonical := canonical_url(str(line), base=url)) is not None
        )
        return RobotsRules(
            origin=origin,
            verdict="parsed",
            expires_at=self._clock.monotonic() + self._settings.ttl_s,
            user_agent=token,
            crawl_delay_s=None
            if delay is None or delay < 0
            else min(float(delay), self._settings.crawl_delay_cap_s),
            sitemaps=tuple(sitemaps)[: self._settings.max_sitemaps],
            parser=parser,
        )

    def _unavailable(self, origin: str, reason: str) -> RobotsRules:
        """No robots.txt (RFC 9309 2.3.1.3): crawl anything, ask again after the full TTL."""
        return RobotsRules(
            origin=origin,
            verdict="allow_all",
            expires_at=self._clock.monotonic() + self._settings.ttl_s,
            user_agent=self._settings.user_agent_token,
            reason=reason,
        )

    def _unreachable(self, origin: str, failure: Failure) -> RobotsRules:
        """robots.txt could not be read (RFC 9309 2.3.1.4): crawl nothing, ask again soon."""
        return RobotsRules(
            origin=origin,
            verdict="disallow_all",
            expires_at=self._clock.monotonic() + self._settings.error_ttl_s,
            user_agent=self._settings.user_agent_token,
            reason=failure.message(),
            failure=failure,
        )
