"""The CLI runs as its own process against the live web process, with a config folder of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kubesim.wait import WaitTimeout, wait_for
from tests.api import conftest as api_fixtures

# The live web process and tokens, shared with the API tests.
_live_web = api_fixtures._live_web
live_web = api_fixtures.live_web
token_for = api_fixtures.token_for

ROOT = Path(__file__).resolve().parents[2]


class Cli:
    """One ``slipway`` process, its output collected as it comes."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cli.main", *argv], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(self.process.stdout, self.stdout), daemon=True),
            threading.Thread(target=self._read, args=(self.process.stderr, self.stderr), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream, into: list[str]) -> None:
        for line in stream:
            into.append(line)

    def wait_for_output(self, text: str, *, timeout: float = 30) -> None:
        def printed() -> bool:
            if any(text in line for line in self.stdout):
                return True
            if self.process.poll() is not None:
                for reader in self._readers:
                    reader.join(2)
                if any(text in line for line in self.stdout):
                    return True
                pytest.fail(f"slipway exited {self.process.returncode} without printing {text!r}:\n{self.out}\n{self.err}")
            return False

        try:
            wait_for(printed, timeout=timeout, interval=0.05, message=f"slipway to print {text!r}")
        except WaitTimeout:
            pytest.fail(f"slipway did not print {text!r} within {timeout} s:\n{self.out}\n{self.err}")

    def wait(self, timeout: float = 60) -> int:
        code = self.process.wait(timeout)
        for reader in self._readers:
            reader.join(5)
        return code

    @property
    def out(self) -> str:
        return "".join(self.stdout)

    @property
    def err(self) -> str:
        return "".join(self.stderr)


@pytest.fixture
def cli_env(tmp_path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLIPWAY_")}
    env.update({"XDG_CONFIG_HOME": str(tmp_path / "config"), "HOME": str(tmp_path), "PYTHONUNBUFFERED": "1"})
    return env


@pytest.fixture
def slipway(cli_env):
    """Start ``slipway ARGS…``; returns the running process."""

    def start(*argv: str, env: dict[str, str] | None = None) -> Cli:
        return Cli(list(argv), {**cli_env, **(env or {})})

    return start


@pytest.fixture
def logged_in(live_web, cli_env, token_for, alice):
    """alice's token in the environment, as a CI job would give it."""
    cli_env.update({"SLIPWAY_URL": live_web.url, "SLIPWAY_TOKEN": token_for(alice)})
    return live_web
