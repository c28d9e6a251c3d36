"""A page's main text as a MinHash signature, to find near-duplicate pages.

Broder's MinHash (the resemblance of documents, 1997), as site audits measure near-duplicate
content (Screaming Frog's "near duplicates" at 90 % similarity): a text is the set of its word
3-shingles, and two texts are as similar as the share of shingles they have in common of all
those either has (Jaccard). For each of `SIGNATURE_SIZE` hash functions the signature keeps the
smallest hash of any shingle; two signatures agree at each place with a probability equal to the
similarity, so the share of places they agree at estimates it (a standard error of 0.04 at 90 %).
`streamcrawl duplicates --near` groups the pages of a crawl by it.

Words are runs of word characters (``\\w``), lowercased, so markup, punctuation and whitespace
changes are no change. A word costs one MurmurHash3 call; a shingle's hash is its three words'
combined and mixed (SplitMix64's finaliser) to 32 bits, and the hash functions are the
permutations ``x -> a*x + b`` (mod 2**32, ``a`` odd) of those, all in numpy. A page of 1,000
words costs about a third of a millisecond, so only crawls that ask for it
(``find_near_duplicates``) pay it.

The signature travels as the base64 of its `SIGNATURE_SIZE` minima, little-endian 32-bit values:
344 characters. It is part of the wire format: changing the shingles or the hashing changes every
page's signature, and pages signed before and after would no longer compare.
"""

from __future__ import annotations

import base64
import re

import mmh3
import numpy as np
import numpy.typing as npt

SIGNATURE_SIZE = 64
SIGNATURE_CHARS = 344
"""``len(base64 of SIGNATURE_SIZE x 4 bytes)``."""
SHINGLE_WORDS = 3
MIN_WORDS = 20
"""Fewer words than this and a page has no signature: texts that short are alike by being short
(a login form, an empty category), and comparing them would report noise."""
MAX_WORDS = 20_000
"""Only the first words of a longer text count: enough to tell two pages apart, bounded work."""
MAX_CHARS = 400_000
"""Only so much of a text is split into words (20 characters a word): a page of megabytes of
text costs no more than its first words."""

_WORD = re.compile(r"\w+")
_SEEDS = np.array(
    [mmh3.hash(f"streamcrawl-minhash-{n}", signed=False) for n in range(2 * SIGNATURE_SIZE)],
    dtype=np.uint32,
)
_MULTIPLIERS = _SEEDS[:SIGNATURE_SIZE] | np.uint32(1)
_INCREMENTS = _SEEDS[SIGNATURE_SIZE:][:, np.newaxis]
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
_ODD_1 = np.uint64(0x9E3779B97F4A7C15)
_ODD_2 = np.uint64(0xC2B2AE3D27D4EB4F)


def text_minhash(text: str) -> str | None:
    """The signature of ``text``, or None when it has fewer than `MIN_WORDS` words."""
    words = _WORD.findall(text[:MAX_CHARS].lower())[:MAX_WORDS]
    if len(words) < max(MIN_WORDS, SHINGLE_WORDS):
        return None
    hashes = np.array(list(map(mmh3.hash, words)), dtype=np.int64).view(np.uint64)
    shingles = _mix(hashes[:-2] * _ODD_1 + hashes[1:-1] * _ODD_2 + hashes[2:])
    shingles = np.unique((shingles >> np.uint64(32)).astype(np.uint32))
    # One row per hash function x -> a*x + b (mod 2**32, a odd: a permutation of the shingles).
    permuted = np.multiply.outer(_MULTIPLIERS, shingles)
    permuted += _INCREMENTS
    minima = permuted.min(axis=1)
    return base64.b64encode(minima.astype("<u4").tobytes()).decode("ascii")


def signature_values(signature: str) -> npt.NDArray[np.uint32]:
    """The `SIGNATURE_SIZE` values of a signature; ValueError when it is not one."""
    raw = base64.b64decode(signature, validate=True)
    if len(raw) != SIGNATURE_SIZE * 4:
        raise ValueError(f"a signature holds {SIGNATURE_SIZE * 4} bytes, not {len(raw)}")
    return np.frombuffer(raw, dtype="<u4")


def similarity(first: str, second: str) -> float:
    """The estimated share of shingles two texts have in common (0-1)."""
    return float(np.mean(signature_values(first) == signature_values(second)))


def _mix(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """SplitMix64's finaliser: every input bit moves every output bit (wrapping uint64 maths)."""
    values = (values ^ (values >> np.uint64(30))) * _MIX_1
    values = (values ^ (values >> np.uint64(27))) * _MIX_2
    mixed: npt.NDArray[np.uint64] = values ^ (values >> np.uint64(31))
    return mixed
