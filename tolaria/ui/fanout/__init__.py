"""Asking several agents at once: the form, the side-by-side window of a job, Run → Jobs."""
