"""The ``slipway`` command: deploy from CI and scripts, and wait for the truth."""
