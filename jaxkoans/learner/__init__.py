"""The learner's tools behind progress.py: status, watch, hint, diff, reset, reveal, doctor."""
