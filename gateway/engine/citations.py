"""Citation markers in the model's answer → annotations (sans-I/O). Two kinds, as the
tools that give the model sources cite them:

**web_search → `url_citation`** (`Citations`). web_search numbers each source for the
whole response (`[1]`, `[2]`…, a URL seen again keeps its number) and tells the model to
cite by marker. When an answer's text is complete, every marker that names a known
source becomes an annotation over the marker itself (`start_index`/`end_index` are
character offsets into the part's text). The markers stay in the text: the client
has already seen them streamed.

**file_search → `file_citation`** (`CitationFilter`). file_search gives the model each
chunk with a marker, `<|file-id|>` (`file_search.py`), and asks it to cite with it at
the end of a sentence, before the punctuation. The client never sees a marker: the filter takes the answer's text as it streams and gives
back the text without markers and, at each marker of a file the response's searches
found, an annotation `{"type": "file_citation", "file_id", "filename", "index"}`,
`index` being where the marker stood in the text without markers (counted in
characters, Python's and OpenAI's unit). One space before a marker goes with it, as
Llama Stack does. A marker of a file no search found is removed without an annotation
when it looks like a file id (`file-…`, what Llama Stack removes); other `<|…|>` text is
left alone.

Text that may be the start of a marker (`<`, `<|fi`, a trailing space) is held back
until the next piece shows what it is, at most `MAX_HELD` characters; `flush()` gives
back what is held when the text ends.
"""

from __future__ import annotations

import re
from typing import Any

_URL_MARKER = re.compile(r"\[(\d{1,3})\]")


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
        for match in _URL_MARKER.finditer(text):
            number = int(match[1])
            if 1 <= number <= len(self._sources):
                source = self._sources[number - 1]
                found.append({"type": "url_citation", "start_index": match.start(), "end_index": match.end(),
                              "url": source["url"], "title": source["title"]})
        return found


_FILE_MARKER = re.compile(r" ?<\|([A-Za-z0-9_.:-]{1,200})\|>")
_PARTIAL = re.compile(r"<(?:\|[A-Za-z0-9_.:-]{0,200}\|?)?\Z")
MAX_HELD = 256

Piece = str | dict[str, Any]  # text, or an annotation at the current position


class CitationFilter:
    __slots__ = ("files", "_held", "_length")

    def __init__(self, files: dict[str, str]):
        self.files = files      # file id → filename, of the response's searches
        self._held = ""
        self._length = 0        # characters of the current text part given back so far

    def reset(self) -> None:
        """A new text part begins (a new message)."""
        self._held = ""
        self._length = 0

    def feed(self, text: str) -> list[Piece]:
        text = self._held + text
        self._held = ""
        out: list[Piece] = []
        position = 0
        for marker in _FILE_MARKER.finditer(text):
            file_id = marker.group(1)
            known = file_id in self.files
            if not known and not file_id.startswith("file-"):
                continue  # not a citation: stays text
            self._text(out, text[position:marker.start()])
            if known:
                out.append({"type": "file_citation", "file_id": file_id, "filename": self.files[file_id],
                            "index": self._length})
            position = marker.end()
        rest = text[position:]
        cut = _held_from(rest)
        self._text(out, rest[:cut])
        self._held = rest[cut:]
        return out

    def flush(self) -> list[Piece]:
        """What is held back, as text: the answer ended."""
        out: list[Piece] = []
        held, self._held = self._held, ""
        self._text(out, held)
        return out

    def _text(self, out: list[Piece], text: str) -> None:
        if text:
            out.append(text)
            self._length += len(text)


def _held_from(text: str) -> int:
    """Where the end of `text` that may begin a marker starts (len(text): nothing)."""
    start = text.rfind("<", max(len(text) - MAX_HELD, 0))
    if start >= 0 and _PARTIAL.match(text, start):
        return start - 1 if start > 0 and text[start - 1] == " " else start
    return len(text) - 1 if text.endswith(" ") else len(text)
