"""A run's results: its directory (rundir), the task and cluster records in results.jsonl
(records), and the table a run prints (table)."""
