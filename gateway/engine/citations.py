"""Citation markers in a streamed answer → `file_citation` annotations (sans-I/O).

file_search gives the model each chunk with a marker, `<|file-id|>` (`file_search.py`),
and asks it to cite with it at the end of a sentence, before the punctuation. The
client never sees a marker: the filter takes the answer's text as it streams and gives
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

_MARKER = re.compile(r" ?<\|([A-Za-z0-9_.:-]{1,200})\|>")
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
        for marker in _MARKER.finditer(text):
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
