"""Launchers, one module each behind cluster.launchers.base.Launcher; cluster.supervise runs them."""
