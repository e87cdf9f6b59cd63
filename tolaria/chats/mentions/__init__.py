"""@-mentions, Qt-free: the files of a chat's folder (``listing``), cached per folder
(``cache``), matched per keystroke (``matcher``), and sent in each agent's form (``forms``).
ADR 0029."""
