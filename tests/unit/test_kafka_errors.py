"""How the kernel sorts librdkafka's errors: fatal ones stop the service, transient ones retry."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from streamcrawl.exceptions import FatalKafkaError
from streamcrawl.kafka import check_consumer_error, is_fatal


@pytest.mark.parametrize(
    "code",
    [KafkaError._FATAL, KafkaError._FENCED, KafkaError.TOPIC_AUTHORIZATION_FAILED],
)
def test_a_fenced_or_unauthorised_client_is_fatal_and_stops_the_consumer(code: int) -> None:
    error = KafkaError(code, "static consumer fenced by other consumer with same group.instance.id")
    assert is_fatal(error)
    with pytest.raises(FatalKafkaError, match="fenced"):
        check_consumer_error(error)


@pytest.mark.parametrize("code", [KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN])
def test_a_broker_going_away_is_retried(code: int) -> None:
    error = KafkaError(code, "broker down")
    assert not is_fatal(error)
    check_consumer_error(error)  # logged, not raised
