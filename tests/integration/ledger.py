"""A small stateful service for kernel tests: running totals per account.

Each input entry adds `amount` to its account (the record key); the handler keeps count and sum in
its partition's `accounts` table and emits the running totals. Counting is deliberately not
idempotent, so a test can tell a state that saw a message twice from one that saw it once.
Run as a process: `python -m tests.integration.ledger` with STREAMCRAWL_* settings and
LEDGER_INPUTS (comma-separated topic suffixes, co-partitioned when more than one).
"""

from __future__ import annotations

import json
import os

from schemas.base import InternalModel
from schemas.serde import decode
from streamcrawl.handler import BaseHandler, Context, Record
from streamcrawl.service import run_main, run_service, service_spec
from streamcrawl.settings import Settings
from streamcrawl.spec import Input, ServiceSpec


class Entry(InternalModel):
    id: int
    amount: int


def decode_entry(raw: bytes | None) -> Entry:
    entry: Entry = decode(Entry, raw)
    return entry


class LedgerHandler(BaseHandler):
    def __init__(self, output_topic: str) -> None:
        self.output_topic = output_topic

    def handle(self, record: Record, ctx: Context) -> None:
        entry: Entry = record.value
        account = (record.key or "").encode()
        accounts = ctx.table("accounts")
        raw = accounts.get(account)
        count, total = json.loads(raw) if raw else (0, 0)
        count, total = count + 1, total + entry.amount
        accounts.put(account, json.dumps([count, total]).encode())
        ctx.produce(
            self.output_topic,
            record.key,
            json.dumps(
                {"id": entry.id, "count": count, "sum": total, "partition": record.partition}
            ).encode(),
        )


def ledger_spec(settings: Settings, inputs: list[str]) -> ServiceSpec:
    prefix = settings.kafka.topic_prefix
    return service_spec(
        settings,
        "ledger",
        tuple(Input(f"{prefix}{name}", decode_entry) for name in inputs),
        tables=("accounts",),
        co_partitioned=len(inputs) > 1,
    )


def main() -> int:
    settings = Settings()
    inputs = os.environ.get("LEDGER_INPUTS", "in").split(",")
    spec = ledger_spec(settings, inputs)
    return run_service(spec, LedgerHandler(f"{settings.kafka.topic_prefix}out"), settings)


if __name__ == "__main__":
    run_main("ledger", main)
