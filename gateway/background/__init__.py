"""Background responses: runs detached from the client (`runs.py`) and what happens to
them around the processes that run them (`watch.py`)."""
