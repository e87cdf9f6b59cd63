"""The list of conversations on the left: its rows, fan-out job groups, rename and delete."""
