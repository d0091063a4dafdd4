"""Launchers, one module each behind cluster.launchers.base.Launcher; cluster.launchers.supervise runs them."""
