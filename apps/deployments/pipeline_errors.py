"""Errors of the pipeline that the task layer needs to know about (kept apart to avoid import cycles)."""


class TemporaryError(Exception):
    """Something a later attempt may get past (cluster or registry unreachable)."""
