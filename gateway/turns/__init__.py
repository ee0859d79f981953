"""A turn's life, for every endpoint and transport: `prepare.py` (validate, choose the
backend once, create what the turn needs), `run.py` (the one runner, from the backend
to a caller's sink), `settle.py` (charge and record before the terminal event; finish
after), over `turn.py` (`Turn` and the `Backend` protocol) with its two backends,
`forward.py` and `local.py`; `service.py` puts them together for the HTTP layer."""
