"""What a turn changed: its files under the turn, each diff hunk by hunk with Accept and Revert."""
