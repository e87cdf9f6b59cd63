"""Reviewing what a turn changed: its files under the turn, each diff hunk by hunk, Accept and
Revert."""
