"""Citation markers in the model's answer → `url_citation` annotations (sans-I/O).

A tool that gives the model sources (web_search) numbers each one for the whole
response (`[1]`, `[2]`…, a URL seen again keeps its number) and tells the model to
cite by marker. When an answer's text is complete, every marker that names a known
source becomes an annotation over the marker itself (`start_index`/`end_index` are
character offsets into the part's text). The markers stay in the text: the client
has already seen them streamed.
"""

from __future__ import annotations

import re
from typing import Any

_MARKER = re.compile(r"\[(\d{1,3})\]")


class Citations:
    __slots__ = ("_sources", "_numbers")

    def __init__(self) -> None:
        self._sources: list[dict[str, str]] = []   # number n is _sources[n - 1]
        self._numbers: dict[str, int] = {}          # url → its number

    def add(self, url: str, title: str) -> int:
        """The marker number of a source (the same for a URL already given)."""
        number = self._numbers.get(url)
        if number is None:
            self._sources.append({"url": url, "title": title or url})
            number = self._numbers[url] = len(self._sources)
        return number

    def annotations(self, text: str) -> list[dict[str, Any]]:
        """The `url_citation` annotations of the markers in `text` that name a source."""
        found = []
        for match in _MARKER.finditer(text):
            number = int(match[1])
            if 1 <= number <= len(self._sources):
                source = self._sources[number - 1]
                found.append({"type": "url_citation", "start_index": match.start(), "end_index": match.end(),
                              "url": source["url"], "title": source["title"]})
        return found
