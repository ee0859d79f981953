"""What the gateway keeps about conversations beyond running their turns (issue 22):
deleting one with everything stored for it (`forget.py`)."""
