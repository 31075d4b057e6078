"""Real servers on loopback for the builder tests: an OCI registry and git over git:// and HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.git import (
    GitDaemon,
    GitHttpServer,
    GitSshServer,
    TestRepo,
    make_repo,
    sshd_available,
    start_git_daemon,
    start_git_http_server,
    start_git_ssh_server,
)
from tests.support.registry import RegistryServer, registry_available, start_registry

GIT_USER = "alice"
GIT_TOKEN = "ghp_example_token_do_not_log"


@pytest.fixture(scope="session")
def oci_registry() -> Iterator[RegistryServer]:
    """Run Debian's docker-registry on a free loopback port for the whole session."""
    if not registry_available():
        pytest.skip("docker-registry is not installed (apt-get install docker-registry)")
    server = start_registry()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def private_registry() -> Iterator[RegistryServer]:
    """Run a docker-registry that requires Basic auth (alice / s3cret)."""
    if not registry_available():
        pytest.skip("docker-registry is not installed (apt-get install docker-registry)")
    server = start_registry(username="alice", password="s3cret")
    yield server
    server.stop()


@dataclass
class GitServers:
    """The shop repository, served anonymously over git:// and with a token over HTTP."""

    repo: TestRepo
    daemon: GitDaemon
    http: GitHttpServer
    root: Path


@pytest.fixture(scope="session")
def git_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitServers]:
    """Serve a repository with two branches through a git daemon and an authenticated HTTP server."""
    root = tmp_path_factory.mktemp("git")
    repo = make_repo(
        root,
        branches={
            "main": [{"README.md": "# shop\n"}, {"README.md": "# shop\n", "app.py": "print('hello')\n"}],
            "feature/login": [{"login.py": "print('login')\n"}],
        },
        messages={"main": ["Start the shop", "Say hello\n\nA longer body."]},
    )
    daemon = start_git_daemon(root)
    http = start_git_http_server(root, username=GIT_USER, password=GIT_TOKEN)
    yield GitServers(repo=repo, daemon=daemon, http=http, root=root)
    http.stop()
    daemon.stop()


@pytest.fixture(scope="session")
def git_ssh(git_servers: GitServers, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitSshServer]:
    """Serve the same repositories over SSH with a deploy key (needs openssh-server)."""
    if not sshd_available():
        pytest.skip("OpenSSH server is not installed (apt-get install openssh-server)")
    server = start_git_ssh_server(tmp_path_factory.mktemp("ssh"))
    yield server
    server.stop()
