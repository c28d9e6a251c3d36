"""The topic registry against DESIGN.md section 2, and the client limits derived from it."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer

from schemas import registry
from schemas.topic import DAY_MS, MIB, TopicSpec

SPECS = {spec.suffix: spec for spec in registry.TOPICS}

# DESIGN.md section 2, the topics table: name -> cleanup policy.
DESIGN_CLEANUP = {
    "seeds": "delete",
    "crawls": "compact",
    "budget": "delete",
    "urls": "delete",
    "fetch": "delete",
    "outcomes": "delete",
    "pages": "delete",
    "links": "delete",
    "links.by-target": "compact",
    "scores": "compact",
    "progress": "compact",
    "members": "compact",
    "deadletter": "delete",
    "items": "delete",  # beyond DESIGN.md: extracted fields (schemas/items.py)
}


def test_every_design_topic_is_registered_once() -> None:
    suffixes = [spec.suffix for spec in registry.TOPICS]

    assert len(suffixes) == len(set(suffixes))
    assert set(suffixes) == set(DESIGN_CLEANUP)


@pytest.mark.parametrize(("suffix", "cleanup"), sorted(DESIGN_CLEANUP.items()))
def test_cleanup_policy_follows_the_design(suffix: str, cleanup: str) -> None:
    config = SPECS[suffix].broker_config()

    assert SPECS[suffix].cleanup == cleanup
    assert config["cleanup.policy"] == cleanup
    assert ("retention.ms" in config) == (cleanup == "delete")


def test_pages_take_16_mib_zstd() -> None:
    config = SPECS["pages"].broker_config()

    assert config["max.message.bytes"] == str(16 * MIB)
    assert config["compression.type"] == "zstd"


@pytest.mark.parametrize("suffix", ["links", "urls"])
def test_links_and_urls_take_4_mib(suffix: str) -> None:
    assert SPECS[suffix].broker_config()["max.message.bytes"] == str(4 * MIB)


def test_deadletter_is_kept_longest() -> None:
    retention = {s.suffix: s.retention_ms for s in registry.TOPICS if s.cleanup == "delete"}

    assert retention["deadletter"] == max(retention.values())
    assert retention["deadletter"] > 7 * DAY_MS


def test_exactly_urls_outcomes_scores_are_co_partitioned() -> None:
    co_partitioned = {spec.suffix for spec in registry.TOPICS if spec.co_partitioned}

    assert co_partitioned == {"urls", "outcomes", "scores"}
    for suffix in co_partitioned:
        assert SPECS[suffix].partitions is None, "co-partitioned topics take the shared count"
        assert SPECS[suffix].partition_count(9) == 9


def test_members_is_one_partition() -> None:
    assert SPECS["members"].partition_count(12) == 1


def test_names_take_the_prefix() -> None:
    assert SPECS["links.by-target"].name("crawl.") == "crawl.links.by-target"
    assert SPECS["seeds"].name("test-1.") == "test-1.seeds"


def test_changelog_topics_are_compacted_and_sized_like_their_partitions() -> None:
    spec = registry.changelog_topic("frontier", partitions=12)

    assert spec.suffix == "changelog.frontier"
    assert spec.broker_config()["cleanup.policy"] == "compact"
    assert "retention.ms" not in spec.broker_config()
    assert spec.partition_count(6) == 12
    assert registry.changelog_topic("linkgraph").partition_count(6) == 6
    assert spec.max_message_bytes <= registry.largest_message_bytes(), "clients must read it"


def test_largest_message_is_the_largest_topic() -> None:
    largest = max(spec.max_message_bytes for spec in registry.TOPICS)

    assert registry.largest_message_bytes() == largest == SPECS["pages"].max_message_bytes


def _limits(specs: tuple[TopicSpec, ...]) -> tuple[int, int, int, int]:
    producer = registry.producer_limits(specs)
    consumer = registry.consumer_limits(specs)
    return (
        int(producer["message.max.bytes"]),
        int(consumer["max.partition.fetch.bytes"]),
        int(consumer["fetch.max.bytes"]),
        int(consumer["receive.message.max.bytes"]),
    )


@pytest.mark.parametrize(
    "specs",
    [
        registry.TOPICS,
        (*registry.TOPICS, TopicSpec(suffix="huge", key="k", max_message_bytes=100 * MIB)),
        (TopicSpec(suffix="tiny", key="k", max_message_bytes=1 * MIB),),
    ],
    ids=["registry", "with-a-bigger-topic", "only-a-small-topic"],
)
def test_client_limits_cover_the_largest_topic(specs: tuple[TopicSpec, ...]) -> None:
    largest = registry.largest_message_bytes(specs)
    message_max, partition_fetch, fetch_max, receive_max = _limits(specs)

    # librdkafka checks a record's uncompressed size, key and framing included.
    assert message_max > largest
    assert partition_fetch > largest
    assert fetch_max >= partition_fetch
    assert receive_max >= fetch_max + 512, "librdkafka refuses less"


def test_a_bigger_topic_raises_the_client_limits() -> None:
    bigger = (*registry.TOPICS, TopicSpec(suffix="huge", key="k", max_message_bytes=100 * MIB))

    assert all(b > a for a, b in zip(_limits(registry.TOPICS), _limits(bigger), strict=True))


def test_librdkafka_accepts_the_derived_limits() -> None:
    unreachable = {"bootstrap.servers": "127.0.0.1:1", "log_level": 0}

    producer = Producer({**unreachable, **registry.producer_limits()})
    assert producer.flush(0) == 0
    consumer = Consumer({**unreachable, "group.id": "limits", **registry.consumer_limits()})
    consumer.close()
