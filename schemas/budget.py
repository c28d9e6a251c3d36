"""`budget`: how a crawl's max_links is shared between frontier partitions.

A partition that wants to lease more URLs of a finite-budget crawl sends a BudgetRequest to the
crawl's owner; the owner answers with a BudgetGrant addressed to that partition. The owner never
grants more in total than max_links, which makes max_links a hard cap whatever the partition count.
A request names the depth it wants budget for, and the owner answers requests deeper than its open
depth only once a BudgetRecheck it sent to itself opens that depth (`frontier.budget`), so the
budget is spent in breadth-first order across partitions.
Key: crawl id, so requests reach the owner (the owner of the crawl id's `seeds` partition holds the
same partition number here). Producers and consumers: the frontier.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from schemas.base import InternalModel
from schemas.topic import TopicSpec

TOPIC = TopicSpec(suffix="budget", key="crawl_id")


def key(crawl_id: str) -> str:
    return crawl_id


class BudgetRequest(InternalModel):
    kind: Literal["budget_request"] = "budget_request"
    crawl_id: str
    partition: int
    wanted: Annotated[int, Field(ge=1)]
    request_id: str
    depth: Annotated[int, Field(ge=0)] = 0
    """The depth of the URLs the budget is for: the partition's lowest unfinished depth."""


class BudgetGrant(InternalModel):
    kind: Literal["budget_grant"] = "budget_grant"
    crawl_id: str
    partition: int
    granted: Annotated[int, Field(ge=0)]
    request_id: str


class BudgetRecheck(InternalModel):
    """The owner to itself: every depth below ``open_depth`` is finished on every partition, so
    requests up to ``open_depth`` may be granted. An input rather than a tick decision, so a
    redelivered recheck makes the same grants from the same ledger."""

    kind: Literal["budget_recheck"] = "budget_recheck"
    crawl_id: str
    open_depth: Annotated[int, Field(ge=0)]


BudgetMessage = Annotated[BudgetRequest | BudgetGrant | BudgetRecheck, Field(discriminator="kind")]
BUDGET_MESSAGE: TypeAdapter[BudgetRequest | BudgetGrant | BudgetRecheck] = TypeAdapter(
    BudgetMessage
)
