"""Citation markers in streamed text → annotations (citations.py)."""

from __future__ import annotations

import pytest

from gateway.engine.citations import CitationFilter

FILES = {"file-a": "a.txt", "file-b": "b.md"}


def run(pieces: list[str]) -> tuple[str, list[dict]]:
    """The text given back and the annotations, checking each annotation's index
    against the text given back before it."""
    citations = CitationFilter(dict(FILES))
    text, annotations = "", []
    for piece in pieces:
        for out in citations.feed(piece):
            if isinstance(out, str):
                text += out
            else:
                assert out["index"] == len(text)
                annotations.append(out)
    for out in citations.flush():
        text += out
    return text, annotations


def cite(file_id: str, index: int) -> dict:
    return {"type": "file_citation", "file_id": file_id, "filename": FILES[file_id], "index": index}


WHOLE = "Falcon ships in March <|file-a|>. The mascot is Ember <|file-b|>."
EXPECTED = ("Falcon ships in March. The mascot is Ember.", [cite("file-a", 21), cite("file-b", 42)])


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 100])
def test_markers_split_anywhere_across_pieces(size):
    assert run([WHOLE[i:i + size] for i in range(0, len(WHOLE), size)]) == EXPECTED


def test_an_unknown_file_marker_is_removed_without_an_annotation():
    assert run(["Made up <|file-zz|>."]) == ("Made up.", [])


def test_text_that_only_looks_like_a_marker_stays():
    assert run(["a < b, <|im_end|> and <|", "x"]) == ("a < b, <|im_end|> and <|x", [])
    assert run(["ends with <|fi"]) == ("ends with <|fi", [])  # held, then flushed
    assert run(["trailing space "]) == ("trailing space ", [])


def test_reset_starts_the_indexes_of_a_new_text_part():
    citations = CitationFilter(dict(FILES))
    assert citations.feed("one <|file-a|>") == ["one", cite("file-a", 3)]
    citations.reset()
    assert citations.feed("<|file-b|>x") == [cite("file-b", 0), "x"]


def test_what_is_held_is_bounded():
    long = "<|" + "a" * 300
    assert run([long, " end"]) == (long + " end", [])
