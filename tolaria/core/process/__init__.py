"""Runs as processes: the registry of stream ids, process-tree kill, the watchdog, the control socket."""
