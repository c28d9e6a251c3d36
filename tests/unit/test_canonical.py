"""The canonical URL: one table per rule, then properties over generated URL-ish text."""

from __future__ import annotations

import socket
import time

import mmh3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.provisional import urls

from schemas import canonical as url_module
from schemas.canonical import (
    DEFAULT_TRACKING_PARAMS,
    MAX_URL_LENGTH,
    canonical_url,
    fingerprint_hex,
    host_key,
    registered_domain,
    tracking_params_from_setting,
    url_fingerprint,
)


def _table(*rows: tuple[str, str | None]) -> pytest.MarkDecorator:
    return pytest.mark.parametrize(("raw", "expected"), rows, ids=[row[0][:60] for row in rows])


@_table(
    ("HTTP://EXAMPLE.com:80/a/../b/?b=2&a=1&utm_source=x#frag", "http://example.com/b/?a=1&b=2"),
    ("HTTPS://Example.COM/Path", "https://example.com/Path"),
    ("http://example.com", "http://example.com/"),
    ("http://example.com?a=1", "http://example.com/?a=1"),
    ("http://example.com./x", "http://example.com/x"),
    ("http://user:secret@example.com/", "http://example.com/"),
    ("http://a@b@example.com/", "http://example.com/"),
    ("http://example.com/#top", "http://example.com/"),
    ("http://example.com/a#b?c", "http://example.com/a"),
    ("  http://example.com/ \n", "http://example.com/"),
    ("http://exa\tmple.com/pa\nth", "http://example.com/path"),
    ("\x00\x1fhttp://example.com/", "http://example.com/"),
    ("http:example.com/x", "http://example.com/x"),
    ("http:/example.com/x", "http://example.com/x"),
    ("http:///example.com/x", "http://example.com/x"),
    ("http://example.com\\a\\b?c\\d", "http://example.com/a/b?c%5Cd"),
    ("http://evil.example\\@good.example/", "http://evil.example/@good.example/"),
)
def test_scheme_authority_and_cleanup(raw: str, expected: str) -> None:
    assert canonical_url(raw) == expected


@_table(
    ("http://Bücher.example/", "http://xn--bcher-kva.example/"),
    ("http://BÜCHER.example/", "http://xn--bcher-kva.example/"),
    ("http://xn--bcher-kva.example/", "http://xn--bcher-kva.example/"),
    # IDNA 2008 without transitional mapping keeps the sharp s, as browsers do.
    ("http://faß.de/", "http://xn--fa-hia.de/"),
    # IDNA 2008 refuses the emoji; plain Punycode of the UTS 46 mapped label is the fallback.
    ("http://i❤.ws/", "http://xn--i-7iq.ws/"),
    (
        "http://\uff25\uff38\uff21\uff2d\uff30\uff2c\uff25\uff0ecom/",
        "http://example.com/",
    ),  # fullwidth
    ("http://example。com/", "http://example.com/"),
    ("http://ex%61mple.com/", "http://example.com/"),
    ("http://b%C3%BCcher.example/", "http://xn--bcher-kva.example/"),
    ("http://my_host.example.com/", "http://my_host.example.com/"),
    ("http://-edge-.example/", "http://-edge-.example/"),
    ("http://127.0.0.1/", "http://127.0.0.1/"),
    ("http://127.1/", "http://127.0.0.1/"),
    ("http://0x7f.0.0.1/", "http://127.0.0.1/"),
    ("http://0177.0.0.1/", "http://127.0.0.1/"),
    ("http://2130706433/", "http://127.0.0.1/"),
    ("http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/", "http://127.0.0.1/"),  # fullwidth
)
def test_host(raw: str, expected: str) -> None:
    assert canonical_url(raw) == expected


@_table(
    ("http://example.com:80/", "http://example.com/"),
    ("http://example.com:0080/", "http://example.com/"),
    ("http://example.com:/", "http://example.com/"),
    ("https://example.com:443/", "https://example.com/"),
    ("http://example.com:443/", "http://example.com:443/"),
    ("https://example.com:80/", "https://example.com:80/"),
    ("http://example.com:8080/", "http://example.com:8080/"),
    ("http://[::1]:8080/", "http://[::1]:8080/"),
    ("http://[::1]:80/", "http://[::1]/"),
    ("https://[::1]:443/x", "https://[::1]/x"),
    ("http://[2001:DB8:0:0:0:0:0:1]/", "http://[2001:db8::1]/"),
    ("http://[2001:db8:0:0:1:0:0:1]/", "http://[2001:db8::1:0:0:1]/"),
    ("http://[::ffff:1.2.3.4]/", "http://[::ffff:102:304]/"),
    ("http://[1:2:3:4:5:6:7:8]/", "http://[1:2:3:4:5:6:7:8]/"),
)
def test_ports_and_ip_literals(raw: str, expected: str) -> None:
    assert canonical_url(raw) == expected


@_table(
    ("http://example.com/a/./b/../c", "http://example.com/a/c"),
    ("http://example.com/a/b/..", "http://example.com/a/"),
    ("http://example.com/a/.", "http://example.com/a/"),
    ("http://example.com/../../x", "http://example.com/x"),
    ("http://example.com/a/%2e%2E/b", "http://example.com/b"),
    ("http://example.com/.hidden/..x", "http://example.com/.hidden/..x"),
    ("http://example.com//a//b", "http://example.com//a//b"),
    ("http://example.com/%7euser/%7E", "http://example.com/~user/~"),
    ("http://example.com/%41%62%31%2D%5F", "http://example.com/Ab1-_"),
    ("http://example.com/a%2fb%3d", "http://example.com/a%2Fb%3D"),
    ("http://example.com/a b", "http://example.com/a%20b"),
    ("http://example.com/résumé", "http://example.com/r%C3%A9sum%C3%A9"),
    ("http://example.com/r%c3%a9sum%C3%A9", "http://example.com/r%C3%A9sum%C3%A9"),
    ("http://example.com/100%", "http://example.com/100%25"),
    ("http://example.com/%zz%4", "http://example.com/%25zz%254"),
    (
        'http://example.com/a|b^c`d{e}"<>[]',
        "http://example.com/a%7Cb%5Ec%60d%7Be%7D%22%3C%3E%5B%5D",
    ),
    ("http://example.com/;p=1,2:@!$&'()*+", "http://example.com/;p=1,2:@!$&'()*+"),
    ("http://example.com/\x00\x7f", "http://example.com/%00%7F"),
)
def test_path(raw: str, expected: str) -> None:
    assert canonical_url(raw) == expected


@_table(
    ("http://example.com/?b=2&a=1", "http://example.com/?a=1&b=2"),
    # Sorting is by name only and stable: repeated names keep their order.
    ("http://example.com/?b=2&a=9&b=1", "http://example.com/?a=9&b=2&b=1"),
    ("http://example.com/?B=1&a=2", "http://example.com/?B=1&a=2"),
    ("http://example.com/?a&b=&c=3", "http://example.com/?a&b=&c=3"),
    ("http://example.com/?", "http://example.com/"),
    ("http://example.com/?&&", "http://example.com/"),
    ("http://example.com/?a=1&&b=2&", "http://example.com/?a=1&b=2"),
    ("http://example.com/?q=a%20b+c%7e%2b", "http://example.com/?q=a%20b+c~%2B"),
    ("http://example.com/?q=ü&r=a b", "http://example.com/?q=%C3%BC&r=a%20b"),
    ("http://example.com/?next=/a?b", "http://example.com/?next=/a?b"),
    ("http://example.com/?a=%26&b=%3D", "http://example.com/?a=%26&b=%3D"),
    ("http://example.com/?utm_source=x", "http://example.com/"),
    (
        "http://example.com/p?utm_source=a&UTM_Medium=b&utm_x=c&gclid=1&fbclid=2&msclkid=3"
        "&mc_cid=4&mc_eid=5&_ga=6&yclid=7&igshid=8&id=9",
        "http://example.com/p?id=9",
    ),
    ("http://example.com/?utm%5Fsource=x&k=1", "http://example.com/?k=1"),
    ("http://example.com/?utm=1&xutm_source=2", "http://example.com/?utm=1&xutm_source=2"),
)
def test_query(raw: str, expected: str) -> None:
    assert canonical_url(raw) == expected


@_table(
    # Java servlets' path parameter, whatever its case and value (a jvmRoute suffix included).
    ("http://shop.example/cart;jsessionid=0A1B2C3D4E.node1?x=1", "http://shop.example/cart?x=1"),
    ("http://shop.example/a;JSESSIONID=abc/b;v=1", "http://shop.example/a/b;v=1"),
    ("http://shop.example/;jsessionid=", "http://shop.example/"),
    # Session parameters by name, any value, any case.
    ("http://shop.example/?PHPSESSID=ab12&page=2", "http://shop.example/?page=2"),
    ("http://shop.example/?jsessionid=1&ASPSESSIONIDQQGGQTRB=HKLM", "http://shop.example/"),
    ("http://shop.example/?CFID=123&CFTOKEN=456-7&q=a", "http://shop.example/?q=a"),
    # sid, sessionid, session_id only when the value looks random: a short id selects content.
    ("http://shop.example/?sid=4f9c2d1e8a7b6c5d&p=1", "http://shop.example/?p=1"),
    ("http://shop.example/?sessionid=AbCdEfGh12345678", "http://shop.example/"),
    ("http://shop.example/?sid=12&section=3", "http://shop.example/?section=3&sid=12"),
    ("http://shop.example/?session_id=short", "http://shop.example/?session_id=short"),
    # Not session ids: other path parameters, names that merely contain one.
    ("http://shop.example/doc;version=2", "http://shop.example/doc;version=2"),
    ("http://shop.example/?mysid=4f9c2d1e8a7b6c5d", "http://shop.example/?mysid=4f9c2d1e8a7b6c5d"),
)
def test_session_ids_are_stripped(raw: str, expected: str) -> None:
    """A server that puts a session id in every link for a client without cookies mints a new
    URL for every page at every visit (a spider trap); Heritrix strips them the same way."""
    assert canonical_url(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "   ",
        "mailto:someone@example.com",
        "javascript:alert(1)",
        "JavaScript:void(0)",
        "data:text/html,<b>hi</b>",
        "ftp://example.com/file",
        "file:///etc/passwd",
        "ws://example.com/",
        "tel:+123",
        "//example.com/no-base",
        "relative/path",
        "/absolute/path",
        "?q=1",
        "http://",
        "http:///",
        "http://@/",
        "http://:80/",
        "http://[::1/",
        "http://[::1]x/",
        "http://[::1]]/",
        "http://[1.2.3.4]/",
        "http://[fe80::1%25eth0]/",
        "http://[v1.fe]/",
        "http://[]/",
        "http://example.com:0/",
        "http://example.com:65536/",
        "http://example.com:99999999999999999999/",
        "http://example.com:8o/",
        "http://example.com:-1/",
        "http://example.com:١٢/",
        "http://exa mple.com/",
        "http://exa<mple.com/",
        "http://a..b/",
        "http://.example.com/",
        "http://example.com../",
        "http://" + "a" * 64 + ".com/",
        "http://" + "a." * 127 + "com/",
        "http://1.2.3.256/",
        "http://1.2.3.4.5/",
        "http://256.256.256.256/",
        "http://4294967296/",
        "http://foo.09/",
        "http://foo.123/",
        "http://1_0.0.0.1/",
        "http://%zz.example/",
        "http://%ff.example/",
        "http://a%2Fb.example/",
        "http://\U000e0001.example/",
        "http://℀.example/",
        "http://example.com/" + "a" * MAX_URL_LENGTH,
    ],
)
def test_refused(raw: str) -> None:
    assert canonical_url(raw) is None


BASE = "http://example.com/a/b/c?z=1#f"


@pytest.mark.parametrize(
    ("reference", "base", "expected"),
    [
        ("../d", BASE, "http://example.com/a/d"),
        ("d", BASE, "http://example.com/a/b/d"),
        ("./d/", BASE, "http://example.com/a/b/d/"),
        ("../../../../d", BASE, "http://example.com/d"),
        ("/x?y=1", BASE, "http://example.com/x?y=1"),
        ("?q=1", BASE, "http://example.com/a/b/c?q=1"),
        ("", BASE, "http://example.com/a/b/c?z=1"),
        ("#section", BASE, "http://example.com/a/b/c?z=1"),
        ("d?utm_source=feed", BASE, "http://example.com/a/b/d"),
        ("//other.example/p", "https://example.com/", "https://other.example/p"),
        ("///other.example/p", "https://example.com/", "https://other.example/p"),
        ("\\\\other.example\\p", "http://example.com/", "http://other.example/p"),
        ("..\\x", BASE, "http://example.com/a/x"),
        ("http:g", "http://example.com/a/b", "http://example.com/a/g"),
        ("http:/g", "http://example.com/a/b", "http://example.com/g"),
        ("https:g", "http://example.com/a/b", "https://g/"),
        ("HTTPS://Other.example", BASE, "https://other.example/"),
        ("d", "http://Bücher.example:80/x/y", "http://xn--bcher-kva.example/x/d"),
        ("d", "http://example.com", "http://example.com/d"),
        ("d", "  http://example.com/a/\t", "http://example.com/a/d"),
        ("%2e%2e/d", BASE, "http://example.com/a/d"),
        ("http://absolute.example/", "not a url", "http://absolute.example/"),
        ("http://absolute.example/", "mailto:x@example.com", "http://absolute.example/"),
        ("d", "not a url", None),
        ("d", "mailto:x@example.com", None),
        ("d", "", None),
        ("mailto:x@example.com", BASE, None),
        ("javascript:void(0)", BASE, None),
        ("data:,x", BASE, None),
        ("ftp://example.com/", BASE, None),
        ("d", None, None),
    ],
)
def test_relative_resolution(reference: str, base: str | None, expected: str | None) -> None:
    assert canonical_url(reference, base) == expected


def test_configured_tracking_params() -> None:
    params = tracking_params_from_setting(" UTM_*, gclid ,,ref_src, x-* ")
    assert params == frozenset({"utm_*", "gclid", "ref_src", "x-*"})
    url = "http://example.com/?ref_src=tw&utm_campaign=c&x-trace=1&fbclid=2&id=3"
    assert canonical_url(url, tracking_params=params) == "http://example.com/?fbclid=2&id=3"
    assert canonical_url(url, tracking_params=frozenset()) == (
        "http://example.com/?fbclid=2&id=3&ref_src=tw&utm_campaign=c&x-trace=1"
    )
    assert tracking_params_from_setting("") == frozenset()
    assert "utm_*" in DEFAULT_TRACKING_PARAMS
    assert {"gclid", "fbclid", "msclkid", "mc_cid", "mc_eid", "_ga", "yclid", "igshid"} <= (
        DEFAULT_TRACKING_PARAMS
    )


@pytest.mark.parametrize("setting", ["*", "a,*", "utm_*x", "*utm"])
def test_tracking_pattern_with_star_not_at_end_is_a_configuration_error(setting: str) -> None:
    with pytest.raises(ValueError, match="suffix"):
        tracking_params_from_setting(setting)


def test_fingerprint() -> None:
    canonical = "http://example.com/"
    fingerprint = url_fingerprint(canonical)
    assert len(fingerprint) == 16
    assert fingerprint == mmh3.hash_bytes(canonical.encode("utf-8"), 0, True)
    # Pinned: the visited sets on disk hold these, so the value must never drift.
    assert fingerprint_hex(canonical) == "f851714e8a0997a09d41783739294bcc"
    assert fingerprint_hex(canonical) == fingerprint.hex()
    assert url_fingerprint("http://example.com/a") != fingerprint


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://example.com/", "example.com"),
        ("http://example.com:8080/x", "example.com:8080"),
        ("https://example.com:443/", "example.com"),
        ("http://example.com:443/", "example.com:443"),
        ("https://example.com:80/", "example.com:80"),
        ("http://[::1]:8080/", "[::1]:8080"),
        ("https://[::1]/", "[::1]"),
        ("http://Bücher.example:80/x", "xn--bcher-kva.example"),
        ("HTTP://User@EXAMPLE.com./?q#f", "example.com"),
    ],
)
def test_host_key(url: str, expected: str) -> None:
    assert host_key(url) == expected


@pytest.mark.parametrize(
    "url", ["", "/path", "example.com", "mailto:x@example.com", "ftp://example.com/", "http:///x"]
)
def test_host_key_without_a_host_raises(url: str) -> None:
    with pytest.raises(ValueError, match="host"):
        host_key(url)


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("example.com", "example.com"),
        ("www.example.com", "example.com"),
        ("a.b.c.example.co.uk", "example.co.uk"),
        ("WWW.Example.COM.", "example.com"),
        ("xn--bcher-kva.xn--p1ai", "xn--bcher-kva.xn--p1ai"),
        ("www.xn--bcher-kva.xn--p1ai", "xn--bcher-kva.xn--p1ai"),
        # The Public Suffix List's private section counts: each GitHub Pages site is its own.
        ("alice.github.io", "alice.github.io"),
        ("docs.alice.github.io", "alice.github.io"),
        ("localhost", "localhost"),
        ("intranet.corp-unknown-tld", "intranet.corp-unknown-tld"),
        ("co.uk", "co.uk"),
        ("127.0.0.1", "127.0.0.1"),
        ("[::1]", "[::1]"),
        ("2001:db8::1", "2001:db8::1"),
        # Host keys carry a port when it is not the scheme's default: the site is the same.
        ("www.example.com:8080", "example.com"),
        ("127.0.0.1:8080", "127.0.0.1"),
        ("localhost:3000", "localhost"),
        ("[::1]:8443", "[::1]"),
    ],
)
def test_registered_domain(host: str, expected: str) -> None:
    assert registered_domain(host) == expected


def test_registered_domain_uses_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("registered_domain reached for the network")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    url_module._public_suffix_extractor.cache_clear()
    assert registered_domain("news.bbc.co.uk") == "bbc.co.uk"


@pytest.mark.parametrize(
    "junk",
    [
        "http://example.com/" + "a" * 10_000_000,
        "http://" + "a" * 1_000_000,
        "http://[" + ":" * 100_000 + "]/",
        "http://example.com:" + "9" * 100_000 + "/",
        "http://" + "1." * 20_000 + "1/",
        "http://" + "%" * 60_000,
        "http://" + "ü" * 60_000,
        "http://\ud800.example/\udfff?\ud800=1",
        "\x00" * 100_000,
    ],
    ids=lambda junk: repr(junk[:30]),
)
def test_huge_and_hostile_input_is_refused_quickly(junk: str) -> None:
    started = time.perf_counter()
    assert canonical_url(junk) is None
    assert canonical_url("x", base=junk) is None
    assert time.perf_counter() - started < 2.0


def test_surrogates_in_path_become_replacement_characters() -> None:
    assert canonical_url("http://example.com/\ud800") == "http://example.com/%EF%BF%BD"


# Properties. -----------------------------------------------------------------------------------

_SCHEMES = st.sampled_from(
    ["http://", "https://", "HTTP://", "http:", "https:/", "http:\\\\", "//", "", "ftp://"]
)
_HOSTS = st.one_of(
    st.sampled_from(
        [
            "example.com",
            "EXAMPLE.com.",
            "Bücher.example",
            "faß.de",
            "i❤.ws",
            "\uff25\uff38\uff21\uff2d\uff30\uff2c\uff25.com",
            "ex%61mple.com",
            "my_host.example",
            "xn--bcher-kva.example",
            "xn--invalid-.example",
            "127.1",
            "0x7f.0.0.1",
            "2130706433",
            "[::1]",
            "[2001:DB8::0:1]",
            "[::ffff:1.2.3.4]",
            "[::1",
            "user:pw@example.com",
            "a..b",
            "",
        ]
    ),
    st.text(max_size=12),
)
_PORTS = st.sampled_from(["", ":", ":80", ":443", ":8080", ":08080", ":0", ":65536", ":x"])
_SEGMENTS = st.one_of(
    st.sampled_from(
        [
            "a",
            ".",
            "..",
            "%2e",
            "%2E%2e",
            "%7e",
            "%7E",
            "%2f",
            "%41",
            "%zz",
            "%",
            "%4",
            "é",
            " ",
            "a b",
            "~",
            ";p=1",
            "\\",
            "|",
            "",
        ]
    ),
    st.text(max_size=6),
)
_PATHS = st.lists(_SEGMENTS, max_size=6).map("/".join)
_PARAM_NAMES = st.sampled_from(["a", "b", "B", "q", "utm_source", "UTM_Medium", "gclid", "%61", ""])
_PARAMS = st.tuples(_PARAM_NAMES, st.sampled_from(["", "=", "=1", "=a%20b", "=x+y", "=%7e"]))
_QUERIES = st.one_of(
    st.just(""),
    st.lists(_PARAMS, max_size=5).map(lambda ps: "?" + "&".join(n + v for n, v in ps)),
    st.text(max_size=10).map(lambda text: "?" + text),
)
_FRAGMENTS = st.sampled_from(["", "#", "#frag", "#a?b=1", "#/x/../y"])

_COMPOSITE_URLS = st.builds(
    lambda scheme, host, port, path, query, fragment: (
        f"{scheme}{host}{port}/{path}{query}{fragment}"
    ),
    _SCHEMES,
    _HOSTS,
    _PORTS,
    _PATHS,
    _QUERIES,
    _FRAGMENTS,
)
_URLISH = st.one_of(urls(), _COMPOSITE_URLS, st.text())
_BASES = st.one_of(st.none(), urls(), _COMPOSITE_URLS, st.text(max_size=30))


def _assert_canonical_shape(canonical: str) -> None:
    assert canonical.startswith(("http://", "https://"))
    assert len(canonical) <= MAX_URL_LENGTH
    assert canonical.isascii()
    assert canonical.isprintable()
    assert "#" not in canonical
    assert " " not in canonical
    assert canonical.partition("?")[1:] != ("?", "")
    assert canonical.split("/")[2] == host_key(canonical)


@settings(deadline=None, max_examples=300)
@given(raw=_URLISH)
def test_canonical_url_is_idempotent(raw: str) -> None:
    canonical = canonical_url(raw)
    if canonical is not None:
        _assert_canonical_shape(canonical)
        assert canonical_url(canonical) == canonical


@settings(deadline=None, max_examples=300)
@given(reference=_URLISH, base=_BASES)
def test_resolution_is_idempotent(reference: str, base: str | None) -> None:
    canonical = canonical_url(reference, base)
    if canonical is not None:
        _assert_canonical_shape(canonical)
        assert canonical_url(canonical) == canonical
        # A canonical URL is its own resolution against any base, and an empty reference's.
        assert canonical_url(canonical, base) == canonical
        assert canonical_url("", canonical) == canonical


@settings(deadline=None, max_examples=300)
@given(raw=st.text(), base=st.one_of(st.none(), st.text()))
def test_never_raises_on_arbitrary_text(raw: str, base: str | None) -> None:
    canonical = canonical_url(raw, base)
    assert canonical is None or canonical.startswith(("http://", "https://"))


@settings(deadline=None, max_examples=300)
@given(url=urls())
def test_generated_web_urls_survive(url: str) -> None:
    canonical = canonical_url(url)
    assert canonical is not None
    host = url.split("/")[2].rpartition(":")[0] or url.split("/")[2]
    assert host_key(canonical).partition(":")[0] == host.lower()
