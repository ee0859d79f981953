"""Citation markers → annotations (engine/citations.py): url_citation for web sources,
file_citation in streamed text."""

from __future__ import annotations

import pytest

from gateway.engine.citations import CitationFilter, Citations

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


def test_sources_are_numbered_once_per_response():
    citations = Citations()
    assert citations.add("https://a.example/", "A") == 1
    assert citations.add("https://b.example/", "") == 2
    assert citations.add("https://a.example/", "A again") == 1  # the same URL keeps its number


def test_markers_of_known_sources_become_annotations():
    citations = Citations()
    citations.add("https://a.example/", "A")
    citations.add("https://b.example/", "")
    text = "Llamas hum [1]. Alpacas too [2][1]; not [3], not [x], not [0]."
    assert citations.annotations(text) == [
        {"type": "url_citation", "start_index": 11, "end_index": 14, "url": "https://a.example/", "title": "A"},
        {"type": "url_citation", "start_index": 28, "end_index": 31, "url": "https://b.example/",
         "title": "https://b.example/"},  # no title: the URL is the title (the openai type requires one)
        {"type": "url_citation", "start_index": 31, "end_index": 34, "url": "https://a.example/", "title": "A"}]
    assert [text[a["start_index"]:a["end_index"]] for a in citations.annotations(text)] == ["[1]", "[2]", "[1]"]


def test_no_sources_no_annotations():
    assert Citations().annotations("see [1]") == []
