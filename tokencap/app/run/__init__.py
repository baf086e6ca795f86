"""The Run page's room: `run.py` (the page, named as its URL) and the parts it lays out beside it."""
