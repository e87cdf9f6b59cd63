"""Qt-free chat service shared by the window and `tolaria run`: titles, history, resume, run options, saved runs."""
