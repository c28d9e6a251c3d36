"""Benchmark: what an adaptive recrawl interval buys against a fixed one (`frontier.recrawl`).

Seed 004 recrawls Wikipedia every 24 hours and counts 95 % of those fetches as wasted: the page had
not changed. Pages change at very different rates, so one interval is too long for a few pages and
far too short for most.

One run, all policies on the same pages and the same clock:

- Pages: ``--pages`` pages. A share ``--static`` never changes. The others change at random
  (a Poisson process), at a rate drawn log-uniformly between once a year and once every
  ``--fastest-hours`` (1).
  The pages are synthetic, a stand-in for a wiki's long tail of rarely edited articles and its
  few busy ones.
- Fetches: every page is fetched at time 0, then recrawled for ``--days`` days, each recrawl
  scheduled by `frontier.recrawl.recrawl_interval_ms` (the frontier's own function) for a crawl
  request of each policy:
  - ``fixed``: ``--recrawl-hours`` for every page (the baseline);
  - ``adaptive``: ``--recrawl-adaptive`` from the same interval, with its default bounds;
  - ``fixed, same fetches``: the fixed interval that spends as many fetches as ``adaptive`` did
    (a baseline at equal cost).
- For each policy it gives:
  - the recrawls, and the share of them that found the page changed;
  - freshness, the time-averaged share of pages whose last fetched copy is still current (Cho and
    Garcia-Molina's measure);
  - mean age, the average time since a page's first change that is not fetched yet;
  - the changes never seen, because a later change replaced them before a fetch.

Each figure of the two other policies is also given as a ratio to ``fixed``. Not a test: nothing is
asserted.

    python -m tests.bench.bench_recrawl [--pages 10000] [--days 60] [--recrawl-hours 24]
"""

from __future__ import annotations

import argparse
import math
import random
from dataclasses import dataclass

from frontier.recrawl import HOUR_MS, recrawl_interval_ms
from schemas.seeds import CrawlRequest

YEAR_H = 365 * 24.0


@dataclass
class Tally:
    recrawls: int = 0
    found_changed: int = 0
    fresh_ms: float = 0.0
    age_ms: float = 0.0
    changes: int = 0
    """Every change that happened, seen or not."""


def change_rates(
    pages: int, static: float, fastest_hours: float, rng: random.Random
) -> list[float]:
    """Per page, its changes per millisecond (0: never changes)."""
    rates = []
    for _ in range(pages):
        if rng.random() < static:
            rates.append(0.0)
        else:
            mean_hours = math.exp(rng.uniform(math.log(fastest_hours), math.log(YEAR_H)))
            rates.append(1 / (mean_hours * HOUR_MS))
    return rates


def simulate(request: CrawlRequest, rates: list[float], horizon_ms: int, seed: int) -> Tally:
    """Every page fetched at 0 and then whenever ``request``'s schedule says, until ``horizon_ms``.

    Within one interval, whether a page changes and when it first does are drawn exactly
    (exponential waiting time), and so is the number of changes (Poisson)."""
    rng = random.Random(seed)
    tally = Tally()
    for rate in rates:
        fetched_at, interval = 0, recrawl_interval_ms(request, None, changed=True)
        assert interval is not None
        while fetched_at < horizon_ms:
            span = min(interval, horizon_ms - fetched_at)
            first_change = rng.expovariate(rate) if rate else math.inf
            changed = first_change < span
            if changed:
                tally.fresh_ms += first_change
                tally.age_ms += (span - first_change) ** 2 / 2
                tally.changes += 1 + _poisson(rng, rate * (span - first_change))
            else:
                tally.fresh_ms += span
            fetched_at += span
            if fetched_at >= horizon_ms:
                break
            tally.recrawls += 1
            tally.found_changed += changed
            interval = recrawl_interval_ms(request, interval, changed) or 0
    return tally


def _poisson(rng: random.Random, mean: float) -> int:
    """A Poisson draw by counting exponential gaps (the means here are small)."""
    count, elapsed = 0, rng.expovariate(1.0)
    while elapsed < mean:
        count += 1
        elapsed += rng.expovariate(1.0)
    return count


def report(name: str, tally: Tally, pages: int, horizon_ms: int, base: Tally | None) -> None:
    page_time = pages * horizon_ms
    figures = {
        "recrawls": float(tally.recrawls),
        "found changed": tally.found_changed / max(tally.recrawls, 1),
        "freshness": tally.fresh_ms / page_time,
        "mean age (h)": tally.age_ms / page_time / HOUR_MS,
        "changes never seen": 1 - tally.found_changed / max(tally.changes, 1),
    }
    line = f"{name:<22}"
    for label, value in figures.items():
        shown = f"{value:,.0f}" if label == "recrawls" else f"{value:.3f}"
        line += f"  {label} {shown}"
    print(line)
    if base is not None:
        ratios = {
            "recrawls": tally.recrawls / max(base.recrawls, 1),
            "freshness": tally.fresh_ms / max(base.fresh_ms, 1),
            "mean age": tally.age_ms / max(base.age_ms, 1),
            "changes seen": tally.found_changed / max(base.found_changed, 1),
        }
        print(f"{'':<22}  vs fixed: " + "  ".join(f"{k} x{v:.2f}" for k, v in ratios.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--static", type=float, default=0.3, help="share of pages never changed")
    parser.add_argument(
        "--fastest-hours", type=float, default=1.0, help="the busiest pages change this often"
    )
    parser.add_argument("--days", type=float, default=60)
    parser.add_argument("--recrawl-hours", type=float, default=24)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rates = change_rates(args.pages, args.static, args.fastest_hours, random.Random(args.seed))
    horizon_ms = round(args.days * 24 * HOUR_MS)
    seeds = ["https://wiki.example/"]
    fixed = CrawlRequest(seeds=seeds, recrawl_interval_hours=args.recrawl_hours)
    adaptive = fixed.model_copy(update={"recrawl_adaptive": True})
    print(
        f"{args.pages:,} pages ({args.static:.0%} never change, the others once every "
        f"{args.fastest_hours:g} h to once a year), {args.days:g} days, from a "
        f"{args.recrawl_hours:g} h interval"
    )
    base = simulate(fixed, rates, horizon_ms, args.seed)
    report("fixed", base, args.pages, horizon_ms, None)
    tally = simulate(adaptive, rates, horizon_ms, args.seed)
    report("adaptive", tally, args.pages, horizon_ms, base)
    fetches_per_page = tally.recrawls / args.pages + 1
    same_hours = args.days * 24 / fetches_per_page
    same = fixed.model_copy(update={"recrawl_interval_hours": same_hours})
    equal = simulate(same, rates, horizon_ms, args.seed)
    report(f"fixed {same_hours:.1f} h", equal, args.pages, horizon_ms, base)


if __name__ == "__main__":
    main()
