"""Citation markers → url_citation annotations (engine/citations.py)."""

from gateway.engine.citations import Citations


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
