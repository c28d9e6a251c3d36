"""The canonical URL form every service keys by, its fingerprint, the host key and the domain.

Dedup, partitioning, storage and the link graph all key by :func:`canonical_url` (DESIGN.md
sections 2 and 3, step 2), so two spellings of one resource must meet on one string, and the
string must never change for a given input: fingerprints of it live in every crawl's visited set.
Changing a rule below is therefore a data migration, not a refactor.

The rules are RFC 3986 section 6 normalisation plus the parts of the WHATWG URL standard that real
links exercise (surrounding whitespace, backslashes, missing or extra slashes after the scheme):

1. Leading and trailing C0 controls and spaces are stripped, tabs and newlines removed, lone
   surrogates replaced by U+FFFD, and everything from the first ``#`` dropped.
2. A reference is resolved against ``base`` (RFC 3986 section 5.2, WHATWG slash handling). Only
   http and https results with a host survive; anything else is None, never an exception.
3. Scheme and host are lowercased; the host is percent-decoded, mapped with UTS 46 and encoded
   label by label with IDNA 2008, falling back to plain Punycode (``xn--``) for labels IDNA 2008
   refuses (emoji, underscores next to non-ASCII). ASCII labels may hold ``a-z 0-9 - _``; labels
   are 1-63 characters and hosts at most 253. One trailing dot is dropped. Numeric hosts are parsed
   as IPv4 the WHATWG way (``127.1``, ``0x7f.1``) and IPv6 literals are printed in WHATWG's
   compressed form; zone identifiers are refused.
4. Userinfo and the fragment are dropped, and so are the scheme's default port and an empty port;
   port 0 and ports above 65535 make the URL invalid.
5. In path and query, escapes of unreserved characters are decoded, other escapes are uppercased,
   and every character outside RFC 3986's allowed set (a stray ``%`` included) is UTF-8
   percent-encoded. Dot segments are then removed from the path; an empty path becomes ``/``.
6. Query parameters (split on ``&``) lose empty ones and tracking ones, matched on the lowercased
   name, and are sorted by name, stably, so repeated names keep their order. No query, no ``?``.
   Session ids go too, whatever the tracking setting, as Heritrix's canonicalisation rules strip
   them: a server that puts one in every link for a client without cookies would otherwise mint a
   new URL for every page at every visit, a spider trap. They are the ``;jsessionid=`` path
   parameter (Java servlets), the ``jsessionid``, ``phpsessid``, ``aspsessionid...``, ``cfid`` and
   ``cftoken`` query parameters (any value), and ``sid``, ``sessionid`` and ``session_id`` when the
   value looks random (16 or more letters and digits, not a short id that selects content).
7. Inputs over :data:`MAX_INPUT_LENGTH` and results over :data:`MAX_URL_LENGTH` are refused.

w3lib's ``canonicalize_url`` is not used: it sorts parameters by value too, decodes reserved
escapes in the path (``%3D`` becomes ``=``), keeps userinfo and default ports, and uses IDNA 2003.
Its RFC 3986 character classes are used for the allowed sets.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from typing import NamedTuple
from urllib.parse import unquote

import idna
import mmh3
import tldextract
from w3lib.url import RFC3986_SUB_DELIMS, RFC3986_UNRESERVED

MAX_URL_LENGTH = 8192
MAX_INPUT_LENGTH = 8 * MAX_URL_LENGTH

_DEFAULT_PORTS = {"http": 80, "https": 443}
_MAX_HOST_LENGTH = 253
# Escapes and UTS 46 ignorable characters let a valid host be written longer; not this much longer.
_MAX_HOST_INPUT_LENGTH = 16 * _MAX_HOST_LENGTH

_UNRESERVED = frozenset(RFC3986_UNRESERVED.decode("ascii"))
_PATH_ALLOWED = re.escape(RFC3986_UNRESERVED.decode("ascii") + RFC3986_SUB_DELIMS.decode("ascii"))
# A token is a well-formed escape or one character outside the allowed set (a bare "%" included).
_PATH_TOKEN = re.compile(rf"%[0-9A-Fa-f]{{2}}|[^{_PATH_ALLOWED}:@/]")
_QUERY_TOKEN = re.compile(rf"%[0-9A-Fa-f]{{2}}|[^{_PATH_ALLOWED}:@/?]")

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_C0_OR_SPACE = "".join(map(chr, range(0x21)))
_DROP_TAB_AND_NEWLINE = str.maketrans("", "", "\t\n\r")
_SURROGATE = re.compile("[\ud800-\udfff]")
_LABEL = re.compile(r"[a-z0-9_\-]{1,63}")
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")
_IPV4_PART = {8: re.compile(r"[0-7]+"), 10: re.compile(r"[0-9]+"), 16: re.compile(r"[0-9a-f]+")}
_IPV6_CHARS = re.compile(r"[0-9A-Fa-f:.]+")


class _Parts(NamedTuple):
    """An absolute URL cut at its delimiters; ``query`` is "" when there is none."""

    scheme: str
    authority: str
    path: str
    query: str


def tracking_params_from_setting(setting: str) -> frozenset[str]:
    """Parse a comma separated list of tracking parameter names, ``utm_*`` style prefixes allowed.

    Names are lowercased and blanks skipped. To extend the defaults, take the union with
    :data:`DEFAULT_TRACKING_PARAMS`. A ``*`` anywhere but at the end, or alone, is a configuration
    error (ValueError): a lone ``*`` would strip every query.
    """
    params = frozenset(part.strip().lower() for part in setting.split(",") if part.strip())
    for param in params:
        if param == "*" or "*" in param[:-1]:
            raise ValueError(f"tracking parameter pattern {param!r}: '*' only as a name suffix")
    return params


_SESSION_PATH_PARAM = re.compile(r";jsessionid=[^/;]*", re.IGNORECASE)
_SESSION_PARAMS = frozenset({"jsessionid", "phpsessid", "cfid", "cftoken"})
_SESSION_PARAM_PREFIXES = ("aspsessionid",)
_RANDOM_SESSION_PARAMS = frozenset({"sid", "sessionid", "session_id"})
_RANDOM_VALUE = re.compile(r"[0-9A-Za-z]{16,}")

# Click and campaign identifiers that never select content, only attribute the visit.
DEFAULT_TRACKING_PARAMS: frozenset[str] = tracking_params_from_setting(
    "utm_*, gclid, gclsrc, dclid, gbraid, wbraid, fbclid, msclkid, mc_cid, mc_eid, _ga, _gl,"
    " yclid, igshid, ttclid, twclid, _hsenc, _hsmi, mkt_tok"
)


def canonical_url(
    url: str,
    base: str | None = None,
    *,
    tracking_params: frozenset[str] = DEFAULT_TRACKING_PARAMS,
) -> str | None:
    """The canonical form of ``url`` resolved against ``base``, or None when it is not a crawlable
    http(s) URL. Never raises on any string; see the module docstring for the rules."""
    if len(url) > MAX_INPUT_LENGTH:
        return None
    absolute = _absolute(_clean(url), base)
    if absolute is None:
        return None
    parts = _split(absolute)
    authority = _canonical_authority(parts.scheme, parts.authority)
    if authority is None:
        return None
    path = (
        _remove_dot_segments(
            _SESSION_PATH_PARAM.sub("", _normalise_escapes(parts.path, _PATH_TOKEN))
        )
        if parts.path
        else "/"
    )
    query = _canonical_query(parts.query, tracking_params)
    result = (
        f"{parts.scheme}://{authority}{path}?{query}"
        if query
        else f"{parts.scheme}://{authority}{path}"
    )
    return result if len(result) <= MAX_URL_LENGTH else None


def url_fingerprint(canonical: str) -> bytes:
    """16 bytes of MurmurHash3 x64 128 (seed 0) over the UTF-8 canonical URL: the dedup key."""
    return bytes(mmh3.hash_bytes(canonical.encode("utf-8"), 0, True))


def fingerprint_hex(canonical: str) -> str:
    """:func:`url_fingerprint` as 32 lowercase hex digits, for logs, file names and JSON."""
    return url_fingerprint(canonical).hex()


def host_key(url: str) -> str:
    """The Kafka key by host: lowercase IDNA host, plus ``:port`` when not the scheme's default.

    IPv6 literals keep their brackets. Meant for canonical URLs, but normalises the authority of any
    http(s) URL the same way :func:`canonical_url` does. Raises ValueError when there is no valid
    host, which for a canonical URL means a caller bug.
    """
    scheme, separator, _ = url.partition("://")
    if separator and scheme.lower() in _DEFAULT_PORTS:
        parts = _split(url)
        authority = _canonical_authority(parts.scheme.lower(), parts.authority)
        if authority is not None:
            return authority
    raise ValueError(f"no http(s) host in URL {url[:200]!r}")


def registered_domain(host: str) -> str:
    """The registrable domain of ``host`` (public suffix plus one label), e.g. for scope checks.

    Uses tldextract's bundled Public Suffix List snapshot only: no network, no cache files. The
    list's private section counts, so ``alice.github.io`` is its own domain, as browsers isolate
    sites. IP addresses, single-label hosts and hosts under no known suffix return themselves.
    A port is dropped (``host`` may be a host key, `host_key`): ports of one host are one site,
    as the scope and the parser's internal links have it.
    """
    name = _without_port(host).lower().removesuffix(".")
    if "." not in name or name.startswith("[") or _is_ip_address(name):
        return name
    return _public_suffix_extractor()(name).top_domain_under_public_suffix or name


def _without_port(host: str) -> str:
    """``host`` less a ``:port`` suffix; a bracketed IPv6 literal keeps its brackets, a bare one
    (more than one colon) is left whole."""
    if host.startswith("["):
        end = host.find("]")
        return host if end < 0 else host[: end + 1]
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() and ":" not in name else host


def _clean(text: str) -> str:
    """WHATWG input cleanup, plus dropping the fragment: every rule ignores it."""
    text = text.strip(_C0_OR_SPACE).translate(_DROP_TAB_AND_NEWLINE)
    if not text.isascii():
        text = _SURROGATE.sub("\ufffd", text)
    return text.partition("#")[0]


def _slashes(text: str) -> str:
    """Backslashes before the query act as slashes in http(s) URLs (WHATWG)."""
    path, question, query = text.partition("?")
    return path.replace("\\", "/") + question + query


def _absolute(url: str, base: str | None) -> str | None:
    """``url`` made absolute (``scheme://...``) against ``base``, or None when it cannot be."""
    base_parts = None
    if base is not None and len(base) <= MAX_INPUT_LENGTH:
        base_parts = _base_parts(base)
    scheme_match = _SCHEME.match(url)
    if scheme_match is None:
        reference = _slashes(url)
    else:
        scheme = scheme_match.group()[:-1].lower()
        if scheme not in _DEFAULT_PORTS:
            return None
        reference = _slashes(url[scheme_match.end() :])
        # "http:foo" is relative only to an http base; otherwise any number of slashes may follow.
        if base_parts is None or base_parts.scheme != scheme:
            return f"{scheme}://{reference.lstrip('/')}"
    if base_parts is None:
        return None
    origin = f"{base_parts.scheme}://{base_parts.authority}"
    if reference.startswith("//"):
        return f"{base_parts.scheme}://{reference.lstrip('/')}"
    if reference.startswith("/"):
        return origin + reference
    if reference.startswith("?"):
        return origin + base_parts.path + reference
    if not reference:
        return origin + base_parts.path + (f"?{base_parts.query}" if base_parts.query else "")
    return origin + base_parts.path[: base_parts.path.rfind("/") + 1] + reference


@functools.lru_cache(maxsize=256)
def _base_parts(base: str) -> _Parts | None:
    """The canonical base, split; cached because a parser resolves a page's links in a row."""
    canonical = canonical_url(base, tracking_params=frozenset())
    return None if canonical is None else _split(canonical)


def _split(absolute: str) -> _Parts:
    """Cut ``scheme://authority/path?query`` at its first delimiters."""
    scheme, _, rest = absolute.partition("://")
    end = len(rest)
    for delimiter in "/?#":
        index = rest.find(delimiter)
        if 0 <= index < end:
            end = index
    path, _, query = rest[end:].partition("#")[0].partition("?")
    return _Parts(scheme, rest[:end], path, query)


@functools.lru_cache(maxsize=4096)
def _canonical_authority(scheme: str, authority: str) -> str | None:
    """``host`` or ``host:port`` in canonical form, without userinfo, or None when invalid.

    Cached: a crawl sees few hosts many times, and IDNA and IP parsing are most of a URL's cost."""
    host_and_port = authority.rpartition("@")[2]
    if host_and_port.startswith("["):
        end = host_and_port.find("]")
        if end < 0:
            return None
        host = _canonical_ipv6(host_and_port[1:end])
        after = host_and_port[end + 1 :]
        if after and not after.startswith(":"):
            return None
        port_text = after[1:]
    else:
        host_text, _, port_text = host_and_port.partition(":")
        host = _canonical_host(host_text)
    port = _port_suffix(scheme, port_text)
    if host is None or port is None:
        return None
    return host + port


def _port_suffix(scheme: str, text: str) -> str | None:
    """``:N``, or "" for an empty or default port; None for a port nothing can connect to."""
    if not text:
        return ""
    digits = text.lstrip("0")
    if not (text.isascii() and text.isdigit()) or len(digits) > 5:
        return None
    port = int(digits or "0")
    if not 0 < port <= 65535:
        return None
    return "" if port == _DEFAULT_PORTS[scheme] else f":{port}"


def _canonical_host(text: str) -> str | None:
    """A domain's ASCII form or a dotted IPv4 address, following WHATWG host parsing."""
    if "%" in text:
        try:
            text = unquote(text, errors="strict")
        except UnicodeDecodeError:
            return None
    if len(text) > _MAX_HOST_INPUT_LENGTH:
        return None
    if text.isascii():
        text = text.lower()
    else:
        try:
            text = idna.uts46_remap(text, std3_rules=False, transitional=False)
        except ValueError:
            return None
    labels = text.removesuffix(".").split(".")
    ascii_labels = [_label_to_ascii(label) for label in labels]
    if None in ascii_labels:
        return None
    host = ".".join(label for label in ascii_labels if label is not None)
    if len(host) > _MAX_HOST_LENGTH:
        return None
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        return _parse_ipv4(labels)
    return host


def _label_to_ascii(label: str) -> str | None:
    """One label as IDNA 2008 A-label, or plain Punycode when IDNA 2008 refuses it."""
    if not label.isascii():
        try:
            label = idna.alabel(label).decode("ascii")
        except ValueError:
            label = "xn--" + label.encode("punycode").decode("ascii")
    return label if _LABEL.fullmatch(label) else None


def _parse_ipv4(parts: list[str]) -> str | None:
    """The WHATWG IPv4 parser: 1-4 decimal, octal (leading 0) or hex (0x) parts, last one wide."""
    if len(parts) > 4:
        return None
    numbers: list[int] = []
    for part in parts:
        if part.startswith("0x"):
            digits, radix = part[2:], 16
        elif len(part) > 1 and part.startswith("0"):
            digits, radix = part[1:], 8
        else:
            digits, radix = part, 10
        if digits and not _IPV4_PART[radix].fullmatch(digits):
            return None
        numbers.append(int(digits, radix) if digits else 0)
    if any(number > 255 for number in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        return None
    value = numbers[-1] + sum(number << (8 * (3 - i)) for i, number in enumerate(numbers[:-1]))
    return str(ipaddress.IPv4Address(value))


def _canonical_ipv6(text: str) -> str | None:
    """A bracketed IPv6 literal in WHATWG's serialisation, independent of Python's ``str()``."""
    if not _IPV6_CHARS.fullmatch(text):
        return None
    try:
        packed = ipaddress.IPv6Address(text).packed
    except ValueError:
        return None
    pieces = [int.from_bytes(packed[i : i + 2], "big") for i in range(0, 16, 2)]
    best_start, best_length, start = -1, 1, 0
    while start < 8:
        end = start
        while end < 8 and pieces[end] == 0:
            end += 1
        if end - start > best_length:
            best_start, best_length = start, end - start
        start = max(end, start + 1)
    hexes = [f"{piece:x}" for piece in pieces]
    if best_start < 0:
        return "[" + ":".join(hexes) + "]"
    head, tail = hexes[:best_start], hexes[best_start + best_length :]
    return "[" + ":".join(head) + "::" + ":".join(tail) + "]"


def _escape(match: re.Match[str]) -> str:
    token = match.group()
    if len(token) == 3:
        char = chr(int(token[1:], 16))
        return char if char in _UNRESERVED else token.upper()
    return "".join(f"%{byte:02X}" for byte in token.encode("utf-8"))


def _normalise_escapes(text: str, token: re.Pattern[str]) -> str:
    """Decode unreserved escapes, uppercase the rest, encode what RFC 3986 does not allow."""
    return token.sub(_escape, text)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4 for a path starting with "/"; a trailing dot segment leaves "/"."""
    if "/." not in path:
        return path
    segments = path.split("/")[1:]
    output: list[str] = []
    for segment in segments[:-1]:
        if segment == "..":
            if output:
                output.pop()
        elif segment != ".":
            output.append(segment)
    last = segments[-1]
    if last == ".." and output:
        output.pop()
    output.append("" if last in {".", ".."} else last)
    return "/" + "/".join(output)


def _canonical_query(query: str, tracking_params: frozenset[str]) -> str:
    """Escapes normalised, empty, tracking and session parameters dropped, stably sorted by name."""
    if not query:
        return ""
    exact, prefixes = _tracking_rules(tracking_params)
    kept: list[tuple[str, str]] = []
    for param in _normalise_escapes(query, _QUERY_TOKEN).split("&"):
        name, _, value = param.partition("=")
        lowered = name.lower()
        if (
            param
            and lowered not in exact
            and not lowered.startswith(prefixes)
            and not _is_session_param(lowered, value)
        ):
            kept.append((name, param))
    kept.sort(key=lambda item: item[0])
    return "&".join(param for _, param in kept)


def _is_session_param(lowered_name: str, value: str) -> bool:
    if lowered_name in _SESSION_PARAMS or lowered_name.startswith(_SESSION_PARAM_PREFIXES):
        return True
    return lowered_name in _RANDOM_SESSION_PARAMS and _RANDOM_VALUE.fullmatch(value) is not None


@functools.lru_cache(maxsize=32)
def _tracking_rules(tracking_params: frozenset[str]) -> tuple[frozenset[str], tuple[str, ...]]:
    """Exact names and ``prefix*`` patterns, lowercased, split once per configured set."""
    lowered = {param.lower() for param in tracking_params}
    exact = frozenset(param for param in lowered if not param.endswith("*"))
    prefixes = tuple(
        sorted(param[:-1] for param in lowered if param.endswith("*") and param != "*")
    )
    return exact, prefixes


def _is_ip_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


@functools.cache
def _public_suffix_extractor() -> tldextract.TLDExtract:
    """Built on first use: reads the bundled snapshot, never the network or a cache directory."""
    return tldextract.TLDExtract(
        suffix_list_urls=(), cache_dir=None, include_psl_private_domains=True
    )
