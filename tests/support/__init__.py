"""Helpers that several test suites share: real registries and git servers on loopback."""
