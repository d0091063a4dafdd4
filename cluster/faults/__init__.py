"""Faults a run survives or not: the injector of --fault, the straggler's duty cycle, and what
recovery a run shows."""
