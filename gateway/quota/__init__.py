"""Token quotas (issue 9): limiters per user and per cluster, each with its own balance
per subject, replenished exactly per period from stored timestamps; a reservation
before a turn (admission), the charge after it, `available_quotas`, token history and
the quota API. `service.py` is what the turns and the HTTP layer use (one protocol,
its strategy chosen when it opens: `off.py`, `sqlite_ledger.py`, `postgres_holds.py`);
`store.py` the SQL; `balances.py` the pure arithmetic (the period grammar and its
arithmetic are `gateway/config/periods.py`, which the configuration validates with)."""
