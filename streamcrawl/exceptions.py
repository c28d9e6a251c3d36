"""The kernel's errors, one base class so callers can route them in one place."""

from __future__ import annotations


class StreamcrawlError(Exception):
    """Base of every streamcrawl kernel error."""


class BrokerError(StreamcrawlError):
    """The local Kafka broker could not be fetched, configured, started, reached or stopped."""


class FatalKafkaError(StreamcrawlError):
    """librdkafka reported an error that no retry can fix (fenced producer, bad config)."""


class DeliveryError(StreamcrawlError):
    """A produced message was not delivered within its deadline."""


class StateError(StreamcrawlError):
    """A state store is missing, corrupt or used outside its partition's lifetime."""


class TopicMissingError(StreamcrawlError):
    """A topic a service needs does not exist on the broker (or its metadata could not be read)."""
