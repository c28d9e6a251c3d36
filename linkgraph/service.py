"""`python -m linkgraph`: one link-graph instance (DESIGN section 3, step 9).

Consumes `links` and `links.by-target` in one group with range assignment, so partition p of both
lands on the same instance and state partition p holds the forward index and node records of the
URLs of partition p and their reverse and anchor indexes (`linkgraph.handler`). Produces each
changed edge to `links.by-target`, and dead letters. Reads `members` whole (query routing) and
`crawls` whole (seeds, for orphans and personalised ranking). Serves the graph API on its own port
(`linkgraph.api`), and takes part in the ranker election (`linkgraph.ranker`).
Tunables come from `STREAMCRAWL_LINKGRAPH__*` (e.g. `..._RANKING_INTERVAL_S`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
from typing import Annotated

from confluent_kafka import Consumer
from pydantic import BaseModel, ConfigDict, Field

from linkgraph.analyses import AnalysisParameters
from linkgraph.api import GraphApi
from linkgraph.exceptions import PartitionMismatchError
from linkgraph.export import write_export
from linkgraph.handler import LinkGraphHandler, LinkGraphTopics
from linkgraph.nodecache import MAX_TARGETS
from linkgraph.pagerank import RankParameters
from linkgraph.publisher import ScorePublisher
from linkgraph.ranker import LinkReader, Ranker, RankerConfig
from linkgraph.routing import RANKER_ROLE, Router
from schemas import crawls, links, links_by_target, members, scores
from schemas.canonical import canonical_url
from schemas.serde import decode
from streamcrawl.apiserver import ApiServer
from streamcrawl.clock import SystemClock
from streamcrawl.exceptions import TopicMissingError
from streamcrawl.kafka import (
    KafkaProducer,
    consumer_config,
    producer_config,
    table_consumer_config,
)
from streamcrawl.logs import configure_logging
from streamcrawl.membership import MemberPublisher
from streamcrawl.service import run_service, service_spec
from streamcrawl.settings import Settings
from streamcrawl.table import TopicTable
from streamcrawl.topics import partition_counts, topic_name

log = logging.getLogger(__name__)

TABLES_READY_TIMEOUT_S = 120.0


class LinkGraphOptions(BaseModel):
    model_config = ConfigDict(frozen=True)

    api_host: str = "127.0.0.1"
    api_port: Annotated[int, Field(ge=0, le=65535)] = 0
    """0 picks a free port; the address is published in `members`, where the CLI finds it."""
    ranker_enabled: bool = True
    """Take part in the ranker election (one instance of the group ranks at a time)."""
    ranking_interval_s: Annotated[float, Field(gt=0)] = 60.0
    score_change_ratio: Annotated[float, Field(ge=0)] = 0.01
    damping: Annotated[float, Field(gt=0, lt=1)] = 0.85
    tolerance: Annotated[float, Field(gt=0)] = 1e-6
    max_iterations: Annotated[int, Field(ge=1)] = 100
    farm_share: Annotated[float, Field(gt=0, le=1)] = 0.9
    farm_min_links: Annotated[int, Field(ge=1)] = 10
    syndication_min_links: Annotated[int, Field(ge=1)] = 10
    kept_targets: Annotated[int, Field(ge=1)] = MAX_TARGETS
    """Written targets each state partition keeps as counts (`linkgraph.nodecache`): an in-link
    to a kept one needs no read of its node. About 0.33 KiB each with a 70-character URL, so
    42 MiB a partition at the default; lower it for many partitions an instance."""
    in_link_ends: bool = False
    """Write each in-link's ends into its `links.by-target` value too, as link graphs before the
    value held the edge alone read it (they dead-letter the shorter one): set it while such a
    group is upgraded one instance at a time, and unset it once every instance runs this one."""

    def ranker_config(self) -> RankerConfig:
        return RankerConfig(
            interval_s=self.ranking_interval_s,
            change_ratio=self.score_change_ratio,
            parameters=RankParameters(self.damping, self.tolerance, self.max_iterations),
            analysis=AnalysisParameters(
                farm_share=self.farm_share,
                farm_min_links=self.farm_min_links,
                syndication_min_links=self.syndication_min_links,
            ),
        )


class LinkGraphServiceSettings(Settings):
    linkgraph: LinkGraphOptions = LinkGraphOptions()


def crawl_seeds(table: TopicTable[crawls.CrawlState]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for crawl_id, state in table.snapshot().items():
        canonical = (canonical_url(seed) for seed in state.request.seeds)
        found[crawl_id] = [seed for seed in canonical if seed is not None]
    return found


def build_ranker(
    settings: LinkGraphServiceSettings,
    crawl_table: TopicTable[crawls.CrawlState],
    scores_partitions: int,
) -> Ranker:
    prefix = settings.kafka.topic_prefix
    election = Consumer(
        consumer_config(
            settings, f"{prefix}linkgraph-ranker", assignor="range", static_member=False
        )
    )
    links_topic = topic_name(settings, links.TOPIC)
    return Ranker(
        settings.linkgraph.ranker_config(),
        election,
        topic_name(settings, members.TOPIC),
        lambda: LinkReader(table_consumer_config(settings), links_topic),
        ScorePublisher(
            producer_config(settings), topic_name(settings, scores.TOPIC), scores_partitions
        ),
        lambda: crawl_seeds(crawl_table),
        SystemClock(),
    )


def main() -> int:
    settings = LinkGraphServiceSettings()
    configure_logging("linkgraph", settings.instance_id, settings.log_level)
    links_topic = topic_name(settings, links.TOPIC)
    by_target_topic = topic_name(settings, links_by_target.TOPIC)
    scores_topic = topic_name(settings, scores.TOPIC)
    try:
        counts = partition_counts(settings, [links_topic, by_target_topic, scores_topic])
        if counts[links_topic] != counts[by_target_topic]:
            raise PartitionMismatchError(
                f"{links_topic} has {counts[links_topic]} partitions and {by_target_topic} "
                f"{counts[by_target_topic]}: they must be equal so one instance owns a URL"
            )
    except (PartitionMismatchError, TopicMissingError) as error:
        sys.stderr.write(f"streamcrawl: {error}\n")
        return 2
    handler = LinkGraphHandler(
        LinkGraphTopics(links_topic, by_target_topic, counts[links_topic]),
        in_link_ends=settings.linkgraph.in_link_ends,
        kept_targets=settings.linkgraph.kept_targets,
    )
    member_table: TopicTable[members.Member] = TopicTable(
        table_consumer_config(settings),
        topic_name(settings, members.TOPIC),
        lambda raw: decode(members.Member, raw),
    )
    crawl_table: TopicTable[crawls.CrawlState] = TopicTable(
        table_consumer_config(settings),
        topic_name(settings, crawls.TOPIC),
        lambda raw: decode(crawls.CrawlState, raw),
    )
    options = settings.linkgraph
    with contextlib.ExitStack() as stack:
        for table in (member_table, crawl_table):
            table.start()
            stack.callback(table.stop)
        for table in (member_table, crawl_table):
            if not table.wait_ready(TABLES_READY_TIMEOUT_S):
                sys.stderr.write(f"streamcrawl: a linkgraph table did not load: {table.error}\n")
                return 2
        ranker = (
            build_ranker(settings, crawl_table, counts[scores_topic])
            if (options.ranker_enabled)
            else None
        )
        router = Router(member_table.snapshot, links_topic, counts[links_topic])
        exporter = functools.partial(write_export, table_consumer_config(settings), by_target_topic)
        api = GraphApi(handler, router, ranker, exporter)
        server = ApiServer(api.app(), options.api_host, options.api_port, name="graph-api")
        api_address = server.start()
        stack.callback(server.stop)
        log.info(
            "linkgraph %s serving the graph API on http://%s", settings.instance_id, api_address
        )
        if ranker is not None:
            ranker.start(
                MemberPublisher(
                    KafkaProducer.from_settings(settings),
                    topic_name(settings, members.TOPIC),
                    RANKER_ROLE,
                    settings.instance_id,
                    api_address,
                    api_address=api_address,
                )
            )
            stack.callback(ranker.stop)
        spec = service_spec(
            settings,
            "linkgraph",
            handler.inputs(),
            tables=handler.tables(),
            co_partitioned=True,
        )
        return run_service(spec, handler, settings, api_address=api_address)
