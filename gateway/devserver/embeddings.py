"""Deterministic hashed bag-of-words embeddings (no model, no numpy).

Each lower-cased word adds ±1 to one of `dim` buckets chosen by a hash of the word;
the vector is then L2-normalised. Texts sharing words get a positive cosine, which is
enough for file_search to rank a document that contains the query's words first.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
import struct
from functools import lru_cache

DEFAULT_DIM = 384
_TOKEN_RE = re.compile(r"\w+")


@lru_cache(maxsize=65536)
def _bucket(token: str) -> tuple[int, int]:
    digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value >> 1, 1 if value & 1 else -1


def embed(text: str, dim: int = DEFAULT_DIM) -> list[float]:
    vec = [0.0] * dim
    tokens = _TOKEN_RE.findall(text.lower()) or [""]  # empty text: still a unit vector
    for token in tokens:
        index, sign = _bucket(token)
        vec[index % dim] += sign
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0.0:  # every word cancelled out: fall back to a fixed unit vector
        vec[0] = 1.0
        return vec
    return [v / norm for v in vec]


def encode_base64(vec: list[float]) -> str:
    """OpenAI's `encoding_format: base64`: little-endian float32 bytes."""
    return base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode()


def input_texts(value: object) -> list[str] | None:
    """The `input` of an embeddings request as texts (token arrays are joined)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        if not value:
            return None
        if all(isinstance(v, int) for v in value):
            return [" ".join(str(v) for v in value)]
        texts = []
        for v in value:
            if isinstance(v, str):
                texts.append(v)
            elif isinstance(v, list) and all(isinstance(t, int) for t in v):
                texts.append(" ".join(str(t) for t in v))
            else:
                return None
        return texts
    return None
