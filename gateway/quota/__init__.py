"""Token quotas (issue 9): limiters per user and per cluster, each with its own balance
per subject, replenished exactly per period from stored timestamps; a reservation
before a turn (admission), the charge after it, `available_quotas`, token history and
the quota API. `service.py` is what the pipeline and the HTTP layer use; `store.py` the
SQL; `balances.py` the pure arithmetic (the period grammar and its arithmetic are
`gateway/config/periods.py`, which the configuration validates with)."""
