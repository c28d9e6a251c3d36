"""What a fetch outcome means for its URL and its host (DESIGN.md section 3, step 7).

Three pure policies and one thin wrapper:

- :func:`classify` maps a FetchOutcome to done, unchanged, redirect, retry or dead (with a stable
  dead reason). ``attempts`` counts fetch attempts including the one reported, so with
  ``max_retries=3`` attempts 1 to 3 are retried and the fourth failure is dead.
- :func:`retry_delay_ms` is exponential backoff with jitter (AWS Architecture Blog, "Exponential
  Backoff And Jitter"). Retry ``n`` (the n-th retry, ``n = attempts``) waits, by default, a *full
  jitter* delay drawn uniformly from ``[0, min(cap, base x 2^(n-1))]``: it spreads the retries of
  many URLs of one host best, and the fetcher's politeness delay keeps even a zero delay polite.
  *Decorrelated jitter* draws from ``[base, 3 x previous]`` capped, which needs the previous delay
  but never retries sooner than ``base``. A Retry-After the server sent is a floor on either,
  itself capped at one hour; it may exceed ``cap_ms``, since the server asked for it.
- :class:`LeaseWindow` is how many leases of one host may be in flight (DESIGN step 3). Normally,
  with a politeness delay, two, so the fetcher holds the next request when the delay ends instead
  of waiting a round trip through the frontier; one when the delay is long (10 s or more), where
  that round trip is lost in the wait anyway; without a delay, ``max(2, the fetcher's per-host
  concurrency)``. A 429 or 503 shrinks it to one; it then grows by one for every
  ``N = 10`` successful outcomes (done, unchanged, redirect) until back to normal, and another
  429 or 503 starts over. Ten is a cautious additive increase after a multiplicative decrease
  (AIMD): at a one-second delay the host shows ten seconds of health first. Other failures
  (timeouts, 500) neither shrink nor count.
- :class:`RetryPolicy` reads the clock and owns the RNG: the due time of a retry.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal, NamedTuple

from schemas.outcomes import FetchOutcome
from streamcrawl.clock import Clock

OutcomeAction = Literal["done", "redirect", "retry", "dead", "unchanged"]
DeadReason = Literal[
    "permanent", "retries_exhausted", "robots_denied", "too_many_redirects", "redirect_no_target"
]
Jitter = Literal["full", "decorrelated"]

DEFAULT_BASE_MS = 1_000
DEFAULT_CAP_MS = 600_000
RETRY_AFTER_CAP_MS = 3_600_000
THROTTLE_STATUSES = frozenset({429, 503})
DEFAULT_RECOVERY_SUCCESSES = 10
LONG_POLITENESS_DELAY_MS = 10_000


class OutcomeVerdict(NamedTuple):
    """What to do with a leased URL after its outcome; ``dead_reason`` only for ``dead``."""

    action: OutcomeAction
    dead_reason: DeadReason | None = None


def classify(
    outcome: FetchOutcome, attempts: int, max_retries: int, *, max_redirects: int | None = None
) -> OutcomeVerdict:
    """The verdict on ``outcome``, the ``attempts``-th fetch of its URL (1 for the first).

    A redirect is dead when it names no target or, given ``max_redirects``, when following it would
    take more hops than allowed.
    """
    kind = outcome.kind
    if kind == "done":
        return OutcomeVerdict("done")
    if kind == "unchanged":
        return OutcomeVerdict("unchanged")
    if kind == "redirect":
        if not outcome.redirect_to:
            return OutcomeVerdict("dead", "redirect_no_target")
        if max_redirects is not None and outcome.redirect_hops + 1 > max_redirects:
            return OutcomeVerdict("dead", "too_many_redirects")
        return OutcomeVerdict("redirect")
    if kind == "retryable":
        if attempts <= max_retries:
            return OutcomeVerdict("retry")
        return OutcomeVerdict("dead", "retries_exhausted")
    if kind == "robots_denied":
        return OutcomeVerdict("dead", "robots_denied")
    return OutcomeVerdict("dead", "permanent")


def backoff_ceiling_ms(
    attempt: int, *, base_ms: int = DEFAULT_BASE_MS, cap_ms: int = DEFAULT_CAP_MS
) -> int:
    """``min(cap, base x 2^(attempt-1))``: the most full jitter waits before retry ``attempt``."""
    if attempt < 1:
        raise ValueError(f"retry attempts count from 1, not {attempt}")
    if base_ms < 0 or cap_ms < 0:
        raise ValueError("backoff base and cap cannot be negative")
    # Past 2^40 the cap has long won; stop before building huge integers.
    return min(cap_ms, base_ms << min(attempt - 1, 40))


def retry_delay_ms(
    attempt: int,
    *,
    rng: random.Random,
    base_ms: int = DEFAULT_BASE_MS,
    cap_ms: int = DEFAULT_CAP_MS,
    retry_after_ms: int | None = None,
    jitter: Jitter = "full",
    previous_delay_ms: int | None = None,
) -> int:
    """Milliseconds to wait before retry ``attempt`` (1 for the first retry).

    ``previous_delay_ms`` feeds decorrelated jitter (``base_ms`` when None); full jitter ignores it.
    """
    ceiling = backoff_ceiling_ms(attempt, base_ms=base_ms, cap_ms=cap_ms)
    if jitter == "full":
        delay = rng.randint(0, ceiling)
    else:
        previous = base_ms if previous_delay_ms is None else max(previous_delay_ms, base_ms)
        delay = min(cap_ms, rng.randint(base_ms, max(base_ms, 3 * previous)))
    if retry_after_ms is not None:
        delay = max(delay, min(max(retry_after_ms, 0), RETRY_AFTER_CAP_MS))
    return delay


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """The thin wrapper: reads the clock, draws from the RNG, returns when a retry is due."""

    clock: Clock
    rng: random.Random
    base_ms: int = DEFAULT_BASE_MS
    cap_ms: int = DEFAULT_CAP_MS
    jitter: Jitter = "full"

    def due_ms(
        self,
        attempt: int,
        *,
        retry_after_ms: int | None = None,
        previous_delay_ms: int | None = None,
    ) -> int:
        """Epoch milliseconds at which retry ``attempt`` may be leased."""
        return self.clock.now_ms() + retry_delay_ms(
            attempt,
            rng=self.rng,
            base_ms=self.base_ms,
            cap_ms=self.cap_ms,
            retry_after_ms=retry_after_ms,
            jitter=self.jitter,
            previous_delay_ms=previous_delay_ms,
        )


def is_throttle(outcome: FetchOutcome) -> bool:
    """A 429 or 503: the host asks us to slow down."""
    return outcome.status in THROTTLE_STATUSES


def is_success(outcome: FetchOutcome) -> bool:
    """The host served the request normally (what lets a shrunk window grow back)."""
    return outcome.kind in ("done", "unchanged", "redirect") and not is_throttle(outcome)


def normal_window(
    politeness_delay_ms: int,
    fetcher_host_concurrency: int,
    *,
    long_delay_ms: int = LONG_POLITENESS_DELAY_MS,
) -> int:
    """Leases a healthy host may have in flight; see the module docstring."""
    if politeness_delay_ms > 0:
        return 1 if politeness_delay_ms >= long_delay_ms else 2
    return max(2, fetcher_host_concurrency)


@dataclass(frozen=True, slots=True)
class LeaseWindow:
    """One host's lease window state: ``reduced`` is the limit while recovering from throttling
    (None when healthy) and ``successes`` the successful outcomes since its last step."""

    reduced: int | None = None
    successes: int = 0

    def limit(self, normal: int) -> int:
        """Leases allowed in flight now, given the host's normal window."""
        return normal if self.reduced is None else max(1, min(self.reduced, normal))

    def may_lease(self, in_flight: int, normal: int) -> bool:
        return in_flight < self.limit(normal)

    def after_outcome(
        self,
        *,
        throttled: bool,
        success: bool,
        normal: int,
        recovery_successes: int = DEFAULT_RECOVERY_SUCCESSES,
    ) -> LeaseWindow:
        """The window after one outcome: shrink to one on a throttle, grow back on successes."""
        if throttled:
            return LeaseWindow(reduced=1)
        if self.reduced is None or not success:
            return self
        if self.successes + 1 < recovery_successes:
            return LeaseWindow(self.reduced, self.successes + 1)
        grown = self.reduced + 1
        return LeaseWindow() if grown >= normal else LeaseWindow(grown)


def window_after(
    window: LeaseWindow,
    outcome: FetchOutcome,
    normal: int,
    recovery_successes: int = DEFAULT_RECOVERY_SUCCESSES,
) -> LeaseWindow:
    """:meth:`LeaseWindow.after_outcome` with throttle and success read from ``outcome``."""
    return window.after_outcome(
        throttled=is_throttle(outcome),
        success=is_success(outcome),
        normal=normal,
        recovery_successes=recovery_successes,
    )
