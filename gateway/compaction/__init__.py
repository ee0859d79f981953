"""Compaction (issue 27): `POST /v1/responses/compact` summarizes a window of a
conversation into one opaque `compaction` item, and a later turn's `compaction` items
are opened and given to the model as that summary. Sans-I/O: `seal.py` (the
encryption), `items.py` (a turn's input), `window.py` (the compact request and its
answer); the adapter is `gateway/http/compact.py`."""
