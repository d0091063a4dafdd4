"""System monitor: CPU, memory, network and GPU of every task, on the step times' clock."""
from tfbench.monitor.monitor import Monitor, NullMonitor, monitor_factory
from tfbench.monitor.netstat import NetSource, SocketTraffic

__all__ = ["Monitor", "NullMonitor", "monitor_factory", "NetSource", "SocketTraffic"]
