"""The Rollout page's room: `rollout.py` (the page, named as its URL) and the parts it lays out beside it."""
