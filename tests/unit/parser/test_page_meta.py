"""What a page says about itself reaches the link graph on part 0 of its PageLinks."""

from parser.handler import PageParser
from parser.minhash import text_minhash
from schemas.links import PageLinks
from schemas.pages import FetchedPage

BODY = b"""<html lang="de"><head><title>  Die   Seite </title>
<link rel="canonical" href="https://example.com/seite?utm_source=x">
<meta name="robots" content="noindex, nofollow"></head>
<body><p>Hallo Welt</p><a href="/a">a</a></body></html>"""


def fetched(body: bytes, content_type: str = "text/html; charset=utf-8") -> FetchedPage:
    return FetchedPage(
        crawl_id="c",
        url="https://example.com/seite",
        final_url="https://example.com/seite",
        lease_id="l",
        depth=0,
        status=200,
        headers={"content-type": content_type},
        content_type=content_type,
        body_size=len(body),
        sha256="0" * 64,
        fetched_at=1,
    )


def page_links(body: bytes, content_type: str = "text/html; charset=utf-8") -> list[PageLinks]:
    result = PageParser().parse(fetched(body, content_type), body)
    return [m.value for m in result.messages if isinstance(m.value, PageLinks)]


def test_part_zero_carries_title_canonical_language_and_robots() -> None:
    [links] = page_links(BODY)
    assert links.page is not None
    assert links.page.title == "Die Seite"
    assert links.page.canonical == "https://example.com/seite"
    assert links.page.language == "de"
    assert links.page.noindex and links.page.nofollow
    assert links.page.text_length > 0 and links.page.status == 200


def test_a_page_that_is_not_parsed_still_reports_its_status_and_type() -> None:
    [links] = page_links(b"%PDF-1.7", "application/pdf")
    assert links.page is not None
    assert (links.page.status, links.page.content_type) == (200, "application/pdf")
    assert links.page.title is None and links.edges == []


def test_a_crawl_finding_near_duplicates_gets_the_main_texts_signature() -> None:
    body = (
        b"<html><body><main>" + b" ".join(b"w%d" % n for n in range(30)) + b"</main></body></html>"
    )
    page = fetched(body).model_copy(update={"sign_text": True})
    [links] = [
        m.value for m in PageParser().parse(page, body).messages if isinstance(m.value, PageLinks)
    ]
    assert links.page is not None and links.page.text_minhash == text_minhash(
        " ".join(f"w{n}" for n in range(30))
    )
    [unsigned] = page_links(body)
    assert unsigned.page is not None and unsigned.page.text_minhash is None
