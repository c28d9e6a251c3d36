"""`parser.minhash`: signatures estimate the share of word 3-shingles two texts have in common,
and a page's signature reads its main text only (`parser.linkwalk.WalkedPage.main_text`)."""

from __future__ import annotations

import random
import statistics

import pytest
from lxml import etree
from parsel.selector import create_root_node

from parser.extract import extract_page
from parser.linkwalk import walk_page
from parser.minhash import (
    MAX_CHARS,
    MAX_WORDS,
    MIN_WORDS,
    SIGNATURE_CHARS,
    signature_values,
    similarity,
    text_minhash,
)

VOCABULARY = [f"word{n}" for n in range(20_000)]


def shingles(words: list[str]) -> set[tuple[str, ...]]:
    return {tuple(words[n : n + 3]) for n in range(len(words) - 2)}


def jaccard(first: list[str], second: list[str]) -> float:
    a, b = shingles(first), shingles(second)
    return len(a & b) / len(a | b)


def signed(words: list[str]) -> str:
    signature = text_minhash(" ".join(words))
    assert signature is not None
    return signature


def test_the_estimate_is_unbiased_and_within_its_standard_error() -> None:
    rng = random.Random(7)
    for changed in (0.02, 0.1, 0.3):
        errors = []
        for _ in range(60):
            words = [rng.choice(VOCABULARY) for _ in range(400)]
            edited = list(words)
            for place in rng.sample(range(len(words)), int(changed * len(words))):
                edited[place] = rng.choice(VOCABULARY)
            errors.append(similarity(signed(words), signed(edited)) - jaccard(words, edited))
        # 64 places: a standard error of at most 0.0625 an estimate, 0.008 over 60 of them.
        assert abs(statistics.mean(errors)) < 0.03, changed
        assert statistics.pstdev(errors) < 0.08, changed


def test_texts_without_a_shingle_in_common_are_not_alike() -> None:
    rng = random.Random(8)
    first = [rng.choice(VOCABULARY) for _ in range(300)]
    second = [rng.choice(VOCABULARY) for _ in range(300)]
    assert similarity(signed(first), signed(second)) < 0.1


def test_case_punctuation_and_spacing_are_no_change() -> None:
    text = "The quick brown fox jumps over the lazy dog, " * 3
    variant = "the QUICK brown fox -- jumps over the lazy   dog.\n" * 3
    assert text_minhash(text) == text_minhash(variant)


def test_a_short_text_has_no_signature() -> None:
    assert text_minhash(" ".join(VOCABULARY[: MIN_WORDS - 1])) is None
    signature = text_minhash(" ".join(VOCABULARY[:MIN_WORDS]))
    assert signature is not None and len(signature) == SIGNATURE_CHARS
    assert len(signature_values(signature)) == 64


def test_only_the_first_words_of_a_long_text_count() -> None:
    words = [f"w{n}" for n in range(MAX_WORDS)]
    tail = " ".join(f"t{n}" for n in range(3000))
    assert text_minhash(" ".join(words) + " " + tail) == text_minhash(" ".join(words))
    # Long words: the character limit comes first, and a tail past it is not read; within it,
    # the same tail changes the signature.
    head = [f"{n:049d}" for n in range(MAX_CHARS // 50)]
    assert text_minhash(" ".join(head) + " " + tail) == text_minhash(" ".join(head))
    half = " ".join(head[: len(head) // 2])
    assert text_minhash(half + " " + tail) != text_minhash(half)


def test_a_signature_of_another_size_is_refused() -> None:
    with pytest.raises(ValueError, match="256 bytes"):
        signature_values("AAAA")


def test_the_main_text_leaves_out_navigation_header_footer_and_asides() -> None:
    html = (
        "<html><body><header><nav>Home About</nav></header>"
        "<main><p>Real words here</p><aside>Related <a href=x>x</a></aside><p>more words</p>"
        "<article><header>By someone</header>story</article></main>"
        "<footer>Copyright <section>deep</section></footer>"
        "<div role=navigation>menu <main>inner</main> again</div>tail text</body></html>"
    )
    walked = walk_page(create_root_node(html, etree.HTMLParser))
    main = "Real words here more words By someone story inner tail text"
    assert " ".join(walked.main_text().split()) == main


def test_pages_of_one_template_with_other_articles_are_not_alike() -> None:
    rng = random.Random(9)
    menu = " ".join(f"<a href=/s{n}>section {rng.choice(VOCABULARY)}</a>" for n in range(200))

    def page(article: str) -> str:
        return f"<html><body><nav>{menu}</nav><main><p>{article}</p></main></body></html>"

    first = " ".join(rng.choice(VOCABULARY) for _ in range(60))
    second = " ".join(rng.choice(VOCABULARY) for _ in range(60))
    signatures = [
        extract_page("https://example.com/", {}, page(text), discovered_at=1, sign_text=True)
        for text in (first, first, second)
    ]
    a, b, c = (s.text_minhash for s in signatures)
    assert a is not None and b is not None and c is not None
    assert similarity(a, b) == 1.0 and similarity(a, c) < 0.1
    unsigned = extract_page("https://example.com/", {}, page(first), discovered_at=1)
    assert unsigned.text_minhash is None
