"""End to end: the real frontier, fetcher, parser and storage crawl the demo site through the
broker; every page the site served is then in storage, byte for byte, its WARC records valid."""

from __future__ import annotations

import urllib.parse
from collections import Counter
from pathlib import Path

import pytest

from schemas.registry import ALL_TOPICS
from schemas.seeds import CrawlRequest
from storage.tools import export_crawl
from streamcrawl.demo import DemoSite, blog_post, doc_page
from tests.integration.storage_support import get, get_json, warc_records
from tests.support import Deployment, ServiceProcess, TopicReader, crawl_done, wait_for

pytestmark = pytest.mark.kafka


def expected_body(site: DemoSite, url: str) -> bytes | None:
    path = urllib.parse.urlsplit(url).path
    number = path.rsplit("/", 1)[-1]
    if not number.isdigit():
        return None
    if path.startswith("/docs/"):
        return doc_page(int(number), site.blog).encode()
    return blog_post(int(number), site.docs).encode()


def test_a_crawl_of_the_demo_site_is_stored_whole(kafka_bootstrap: str, tmp_path: Path) -> None:
    deployment = Deployment(kafka_bootstrap, tmp_path, partitions=2)
    deployment.create(ALL_TOPICS)
    storage_root = tmp_path / "storage"
    site = DemoSite().start()
    processes: list[ServiceProcess] = []
    try:
        for role, extra in (
            ("frontier", {}),
            ("fetcher", {"STREAMCRAWL_FETCHER__ALLOWED_NETWORKS": '["127.0.0.0/8"]'}),
            ("parser", {}),
            ("storage", {"STREAMCRAWL_STORAGE__ROOT": str(storage_root)}),
        ):
            log = tmp_path / "logs" / f"{role}.log"
            processes.append(
                ServiceProcess(role, deployment.env(f"{role}-1", **extra), log).start()
            )
        request = CrawlRequest(seeds=[site.seed_url], max_depth=3, politeness_delay_ms=0)
        deployment.publish_crawl(request)
        states = TopicReader(deployment.bootstrap, deployment.topic("crawls"))
        states.read_until(crawl_done, 180, "the crawl done")
        states.close()

        members = TopicReader(deployment.bootstrap, deployment.topic("members"))
        members.read_until(
            lambda ms: any(
                m.value() and b'"role":"storage"' in m.value() and b'"api_address":"' in m.value()
                for m in ms
            ),
            60,
            "the storage API published",
        )
        address = next(
            v["api_address"] for v in members.values() if v["role"] == "storage" and v["ready"]
        )
        members.close()

        served = {f"http://{page}" for page in site.requests if not page.endswith("/robots.txt")}
        pages = {url: expected_body(site, url) for url in served}
        stored = [url for url, body in pages.items() if body is not None]
        assert len(stored) > 10
        for url in stored:
            wait_for(
                lambda url=url: get_json(address, "/v1/page", url=url)[0] == 200,
                60,
                f"{url} stored",
            )
            status, body, headers = get(address, "/v1/page/body", url=url)
            assert status == 200 and body == pages[url], url
            assert headers["X-Status"] == "200"

        records = warc_records(storage_root)  # every digest checked
        responses = Counter(uri for kind, uri, _ in records if kind == "response")
        assert set(stored) <= set(responses)
        assert all(count == 1 for count in responses.values()), responses.most_common(3)
        report = export_crawl(storage_root, request.crawl_id, tmp_path / "crawl.warc.gz")
        assert report.records == len(records) - Counter(k for k, _, _ in records)["warcinfo"]
    finally:
        for process in processes:
            process.kill()
        site.stop()
