"""Qt-free chat service shared by the window (tolaria/qt/controller.py) and ``tolaria run``.

- engine/: the one turn engine (a turn's whole life, its stream gate, the facts it reports)
- service.py: the rules of one turn (answered turns, history or resume, the first prompt's title)
- history.py: the "Previous conversation:" preamble, its byte budget for argv
- titles.py: chat titles; fanout.py: fan-out jobs (members, status, markers)
- run_config.py: ``prepare_run`` and the typed ``RunOptions`` of one run
- inflight.py: queued messages and launches (restart); saved_runs.py: ``tolaria run``'s turns,
  ``open_store`` (the store for scripts and benchmarks)
"""
