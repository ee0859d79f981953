"""The scripted upstream's embeddings: deterministic unit vectors whose cosine ranks texts
that share words first, OpenAI's base64 encoding, and the `input` shapes it accepts."""

from __future__ import annotations

import base64
import math
import struct

from gateway.devserver.embeddings import DEFAULT_DIM, embed, encode_base64, input_texts


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b))


def test_vectors_are_unit_length_deterministic_and_case_blind():
    vector = embed("The Quick brown fox")
    assert len(vector) == DEFAULT_DIM and math.isclose(sum(v * v for v in vector), 1.0)
    assert vector == embed("the quick BROWN fox")
    assert len(embed("x", dim=8)) == 8
    assert math.isclose(sum(v * v for v in embed("")), 1.0)   # empty text: still a unit vector


def test_shared_words_rank_first():
    query = embed("how do I restart the web server")
    relevant = embed("To restart the web server run systemctl restart httpd")
    unrelated = embed("Penguins live in the southern hemisphere")
    assert cosine(query, relevant) > cosine(query, unrelated)


def test_base64_is_little_endian_float32():
    vector = [1.0, -0.5, 0.25]
    assert struct.unpack("<3f", base64.b64decode(encode_base64(vector))) == (1.0, -0.5, 0.25)


def test_input_shapes():
    assert input_texts("hi") == ["hi"]
    assert input_texts(["a", "b"]) == ["a", "b"]
    assert input_texts([1, 2, 3]) == ["1 2 3"]               # one token array
    assert input_texts(["a", [4, 5]]) == ["a", "4 5"]
    for bad in ([], [1.5], ["a", {"b": 1}], None, 7):
        assert input_texts(bad) is None
