"""Ask a git repository which commit a branch points at, and what that commit says."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")

_NOT_FOUND = re.compile(
    r"repository.*not found|not found.*repositor|no such repository|not exported|"
    r"does not appear to be a git repository|authentication failed|could not read (?:username|password)|"
    r"terminal prompts disabled|permission denied|access denied|returned error: 40[134]|"
    r"invalid username or password|invalid credentials",
    re.IGNORECASE,
)
_UNREACHABLE = re.compile(
    r"could not resolve|connection refused|timed out|network is unreachable|no route to host|"
    r"failed to connect|unable to connect|connection reset|early eof|returned error: 5\d\d|"
    r"unable to access|errno=",
    re.IGNORECASE,
)


class GitError(Exception):
    """A git remote could not answer; `permanent` says whether a retry can help."""

    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent


@dataclass(frozen=True)
class GitCredentials:
    """An HTTPS token or an SSH deploy key; the secret parts never show in repr."""

    kind: Literal["token", "ssh"]
    username: str = ""
    password: str = field(default="", repr=False)
    private_key: str = field(default="", repr=False)
    known_hosts: str = ""

    def __post_init__(self) -> None:
        if self.kind == "token" and not self.password:
            raise ValueError("token credentials need a token")
        if self.kind == "ssh" and not self.private_key:
            raise ValueError("ssh credentials need a private key")

    def as_secret_data(self) -> dict[str, str]:
        """Return the keys the build Job's clone step reads from its credentials Secret."""
        if self.kind == "token":
            data = {"password": self.password}
            if self.username:
                data["username"] = self.username
            return data
        data = {"ssh-privatekey": self.private_key if self.private_key.endswith("\n") else self.private_key + "\n"}
        if self.known_hosts:
            data["known_hosts"] = self.known_hosts
        return data


@dataclass(frozen=True)
class Commit:
    """A commit; message and author are empty when only the SHA is known."""

    sha: str
    message: str = ""
    author_name: str = ""
    author_email: str = ""
    committed_at: datetime | None = None

    @property
    def short_sha(self) -> str:
        """Return the seven-character abbreviation."""
        return self.sha[:7]

    @property
    def subject(self) -> str:
        """Return the first line of the message."""
        return self.message.splitlines()[0] if self.message else ""


def redact_url(url: str) -> str:
    """Return URL without any user info, for messages and logs."""
    return _USERINFO.sub("", url)


# Git asks this helper for a username and then a password; it reads both from files in a
# private temporary folder, so the token never appears in arguments or the environment.
_ASKPASS = """#!/bin/sh
case "$1" in
Username*) cat "$SLIPWAY_ASKPASS_DIR/username" ;;
*) cat "$SLIPWAY_ASKPASS_DIR/password" ;;
esac
"""


class _Session:
    """A private folder with credential helpers and an environment that uses them."""

    def __init__(self, credentials: GitCredentials | None) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="slipway-git-")
        self.path = Path(self._dir.name)
        os.chmod(self.path, 0o700)
        home = self.path / "home"
        home.mkdir()
        # A bare environment: the worker's own git config, credential helpers and SSH
        # agent must never lend their access to a user's repository.
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "LANG": "C",
            "LC_ALL": "C",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_ASKPASS": "/bin/false",
            "SSH_ASKPASS": "/bin/false",
            "GIT_SSH_COMMAND": "ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new "
            f"-o UserKnownHostsFile={self.path / 'known_hosts'}",
        }
        if credentials is None:
            return
        if credentials.kind == "token":
            self._write("username", credentials.username or "x-access-token")
            self._write("password", credentials.password)
            self._write("askpass", _ASKPASS, mode=0o700)
            self.env["GIT_ASKPASS"] = str(self.path / "askpass")
            self.env["SLIPWAY_ASKPASS_DIR"] = str(self.path)
        else:
            key = credentials.private_key
            self._write("id", key if key.endswith("\n") else key + "\n")
            strict = "accept-new"
            if credentials.known_hosts:
                self._write("known_hosts", credentials.known_hosts)
                strict = "yes"
            self.env["GIT_SSH_COMMAND"] = (
                f"ssh -i {self.path / 'id'} -o IdentitiesOnly=yes -o BatchMode=yes "
                f"-o UserKnownHostsFile={self.path / 'known_hosts'} -o StrictHostKeyChecking={strict}"
            )

    def _write(self, name: str, content: str, *, mode: int = 0o600) -> None:
        target = self.path / name
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "w") as handle:
            handle.write(content)

    def close(self) -> None:
        self._dir.cleanup()

    def __enter__(self) -> _Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _run(args: list[str], *, env: dict[str, str], timeout: float, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run git with a hard timeout that also ends its ssh or https helpers."""
    command = [
        "git",
        "-c",
        "credential.helper=",
        # `ext::` runs arbitrary commands; never let a repository URL choose it.
        "-c",
        "protocol.ext.allow=never",
        *args,
    ]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # Git starts ssh or git-remote-https as children; end the whole group.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _failure(repo_url: str, stderr: str) -> GitError:
    shown = redact_url(repo_url)
    if "host key verification failed" in stderr.lower():
        return GitError(f"the SSH host key of {shown} does not match the known hosts", permanent=True)
    if _NOT_FOUND.search(stderr):
        return GitError(f"repository {shown} not found or access denied", permanent=True)
    if _UNREACHABLE.search(stderr):
        reason = _reason(stderr)
        return GitError(f"repository unreachable: {shown}" + (f" ({reason})" if reason else ""), permanent=False)
    last = [line.strip() for line in stderr.splitlines() if line.strip()]
    detail = redact_url(last[-1]) if last else "no output"
    return GitError(f"git could not read {shown}: {detail}", permanent=False)


def _reason(stderr: str) -> str:
    lowered = stderr.lower()
    for needle, reason in (
        ("connection refused", "connection refused"),
        ("could not resolve", "host name not resolved"),
        ("timed out", "connection timed out"),
        ("network is unreachable", "network unreachable"),
        ("no route to host", "no route to host"),
        ("connection reset", "connection reset"),
        ("couldn't connect to server", "connection failed"),
        ("failed to connect", "connection failed"),
    ):
        if needle in lowered:
            return reason
    return ""


def ls_remote(
    repo_url: str,
    branch: str,
    *,
    credentials: GitCredentials | None = None,
    timeout: float = 15,
) -> Commit:
    """Return the commit BRANCH points at in REPO_URL, asking the remote with `git ls-remote`."""
    ref = f"refs/heads/{branch}"
    shown = redact_url(repo_url)
    with _Session(credentials) as session:
        try:
            result = _run(["ls-remote", "--", repo_url, ref], env=session.env, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise GitError(f"repository {shown} did not answer within {timeout:g} s", permanent=False) from None
    if result.returncode != 0:
        raise _failure(repo_url, result.stderr)
    # The pattern matches any ref ending in it; keep the exact one.
    for line in result.stdout.splitlines():
        sha, _, name = line.partition("\t")
        if name.strip() == ref and _SHA.match(sha.strip()):
            return Commit(sha=sha.strip())
    raise GitError(f"branch `{branch}` not found in {shown}", permanent=True)


def commit_details(
    repo_url: str,
    sha: str,
    *,
    credentials: GitCredentials | None = None,
    timeout: float = 15,
) -> Commit | None:
    """Return SHA with its message and author, or None when the remote cannot tell cheaply.

    Fetches only that commit and its trees (a blobless, depth-one fetch into a scratch bare
    repository), so the cost does not grow with the repository's history or file sizes.
    """
    if not _SHA.match(sha):
        return None
    with _Session(credentials) as session:
        repo = session.path / "repo.git"
        try:
            init = _run(["init", "--bare", "-q", str(repo)], env=session.env, timeout=timeout)
            if init.returncode != 0:
                return None
            fetch = _run(
                ["fetch", "--depth=1", "--filter=blob:none", "--no-tags", "--quiet", "--", repo_url, sha],
                env=session.env,
                timeout=timeout,
                cwd=repo,
            )
            if fetch.returncode != 0:
                return None
            log = _run(
                ["log", "-1", "--format=%H%x00%an%x00%ae%x00%cI%x00%B", "FETCH_HEAD"],
                env=session.env,
                timeout=timeout,
                cwd=repo,
            )
        except subprocess.TimeoutExpired:
            return None
    if log.returncode != 0:
        return None
    parts = log.stdout.split("\x00", 4)
    if len(parts) != 5 or parts[0] != sha:
        return None
    full_sha, name, email, date, message = parts
    try:
        committed_at: datetime | None = datetime.fromisoformat(date)
    except ValueError:
        committed_at = None
    return Commit(
        sha=full_sha,
        message=message.strip(),
        author_name=name,
        author_email=email,
        committed_at=committed_at,
    )
