"""The gateway's benchmark: the gateway against a direct connection to the scripted upstream.

Run it with `bench/run` (or `python -m bench` with the project's venv); see bench/README.md.
"""
