"""Pieces of a run's supervision shared by every launcher: its status line, signals, teardown,
outcome (cluster record, failure tail) and what a run could leave behind."""
