"""Runs on other machines (issue 25, ADR 0026): the host spec and command targets (hosts.py),
the standalone supervisor that keeps the stop promise there (supervisor/) and how it is
brought (bundle.py, bootstrap.py), the local stand-in process that speaks to it (link.py), and
what a turn uses of all that (launch.py). No Qt."""
