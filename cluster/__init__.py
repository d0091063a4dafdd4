"""Cluster description (plans of tasks) and launchers that start them."""
