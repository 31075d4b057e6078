"""Real git repositories on disk and a real `git daemon` serving them, for tests."""

from __future__ import annotations

import base64
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from kubesim.wait import WaitTimeout, wait_for

# Fixed identity and dates so commits are reproducible and never read the host's config.
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "Alice Example",
    "GIT_AUTHOR_EMAIL": "alice@example.com",
    "GIT_COMMITTER_NAME": "Alice Example",
    "GIT_COMMITTER_EMAIL": "alice@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def git(*args: str, cwd: Path, env: Mapping[str, str] | None = None) -> str:
    """Run git in CWD with a clean identity and return its stdout."""
    full_env = {**os.environ, **_GIT_ENV, "HOME": str(cwd), **(env or {})}
    result = subprocess.run(["git", *args], cwd=cwd, env=full_env, capture_output=True, text=True, check=False, timeout=60)
    if result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


@dataclass
class TestRepo:
    """A bare repository on disk with the commits written to it."""

    __test__ = False  # not a pytest test class

    path: Path
    name: str
    commits: dict[str, list[str]] = field(default_factory=dict)

    def head(self, branch: str = "main") -> str:
        """Return the newest commit of BRANCH."""
        return self.commits[branch][-1]


def make_repo(
    root: Path,
    name: str = "shop.git",
    *,
    branches: Mapping[str, list[Mapping[str, str]]] | None = None,
    messages: Mapping[str, list[str]] | None = None,
) -> TestRepo:
    """Create ROOT/NAME, a bare repository with one commit per file mapping per branch.

    `branches` maps a branch name to a list of {path: content} snapshots; the first
    branch is the default one and the others fork from its first commit.
    """
    branches = branches or {
        "main": [
            {"README.md": "# shop\n"},
            {"README.md": "# shop\n", "app.py": "print('hello')\n"},
        ]
    }
    work = root / f"{name}.work"
    bare = root / name
    work.mkdir(parents=True)
    git("init", "-q", "-b", next(iter(branches)), cwd=work)
    repo = TestRepo(path=bare, name=name)
    first_branch = next(iter(branches))
    for index, (branch, snapshots) in enumerate(branches.items()):
        if index > 0:
            git("checkout", "-q", "-b", branch, repo.commits[first_branch][0], cwd=work)
        for number, files in enumerate(snapshots):
            for relative, content in files.items():
                target = work / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(content)
            git("add", "-A", cwd=work)
            message = (messages or {}).get(branch, [])
            text = message[number] if number < len(message) else f"{branch}: change {number + 1}"
            git("commit", "-q", "--allow-empty", "-m", text, cwd=work)
            repo.commits.setdefault(branch, []).append(git("rev-parse", "HEAD", cwd=work).strip())
    git("clone", "-q", "--bare", str(work), str(bare), cwd=root)
    # The bare clone keeps only the checked-out branch as a local head otherwise.
    for branch in branches:
        git("update-ref", f"refs/heads/{branch}", repo.commits[branch][-1], cwd=bare)
    shutil.rmtree(work)
    return repo


def push_commit(repo: TestRepo, branch: str, files: Mapping[str, str], message: str) -> str:
    """Add a commit on BRANCH of REPO and return its SHA."""
    work = repo.path.parent / f"{repo.name}.push"
    git("clone", "-q", "-b", branch, str(repo.path), str(work), cwd=repo.path.parent)
    for relative, content in files.items():
        target = work / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    git("add", "-A", cwd=work)
    git("commit", "-q", "--allow-empty", "-m", message, cwd=work)
    sha = git("rev-parse", "HEAD", cwd=work).strip()
    git("push", "-q", "origin", branch, cwd=work)
    shutil.rmtree(work)
    repo.commits.setdefault(branch, []).append(sha)
    return sha


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """Stop a server process and wait for it: politely first, then for good."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@dataclass
class GitDaemon:
    """A running `git daemon` exporting every repository under base_path."""

    base_path: Path
    port: int
    process: subprocess.Popen[bytes]

    def url(self, name: str) -> str:
        """Return the git:// URL of repository NAME."""
        return f"git://127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        """Stop the daemon and wait for it."""
        stop_process(self.process)


def wait_for_port(port: int, *, timeout: float = 10.0) -> None:
    """Wait until something accepts connections on 127.0.0.1:PORT."""

    def listening() -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.2)
            return sock.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_for(listening, timeout=timeout, interval=0.05, message=f"something to listen on 127.0.0.1:{port}")
    except WaitTimeout as e:
        raise RuntimeError(str(e)) from None


def start_git_daemon(base_path: Path, *, port: int | None = None, receive_pack: bool = False) -> GitDaemon:
    """Start `git daemon` on 127.0.0.1 serving BASE_PATH and wait until it answers."""
    port = port or free_port()
    args = [
        "git",
        "daemon",
        "--reuseaddr",
        "--listen=127.0.0.1",
        f"--port={port}",
        "--export-all",
        f"--base-path={base_path}",
        "--informative-errors",
    ]
    if receive_pack:
        args.append("--enable=receive-pack")
    args.append(str(base_path))
    process = subprocess.Popen(
        args,
        env={**os.environ, **_GIT_ENV},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
    except RuntimeError:
        process.kill()
        raise
    return GitDaemon(base_path=base_path, port=port, process=process)


@contextmanager
def git_daemon(base_path: Path, *, receive_pack: bool = False) -> Iterator[GitDaemon]:
    """Run a git daemon for the duration of the block."""
    daemon = start_git_daemon(base_path, receive_pack=receive_pack)
    try:
        yield daemon
    finally:
        daemon.stop()


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        return


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


@dataclass
class GitHttpServer:
    """`git http-backend` behind a small WSGI server, optionally requiring Basic auth."""

    base_path: Path
    port: int
    server: WSGIServer
    thread: threading.Thread

    def url(self, name: str) -> str:
        """Return the http:// URL of repository NAME."""
        return f"http://127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        """Stop serving and wait for the thread."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def _http_backend_app(base_path: Path, username: str | None, password: str | None) -> Callable[..., Iterable[bytes]]:
    expected = None
    if username is not None:
        expected = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if expected is not None and environ.get("HTTP_AUTHORIZATION") != expected:
            start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="git"'), ("Content-Length", "0")])
            return [b""]
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        cgi_env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(base_path),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REQUEST_METHOD": environ["REQUEST_METHOD"],
            "PATH_INFO": environ.get("PATH_INFO", ""),
            "QUERY_STRING": environ.get("QUERY_STRING", ""),
            "CONTENT_TYPE": environ.get("CONTENT_TYPE", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": username or "",
            "REMOTE_ADDR": "127.0.0.1",
            "GIT_PROTOCOL": environ.get("HTTP_GIT_PROTOCOL", ""),
            "HTTP_CONTENT_ENCODING": environ.get("HTTP_CONTENT_ENCODING", ""),
        }
        result = subprocess.run(["git", "http-backend"], input=body, env=cgi_env, capture_output=True, check=False, timeout=60)
        head, _, payload = result.stdout.partition(b"\r\n\r\n")
        status = "200 OK"
        headers = []
        for line in head.decode("latin-1").split("\r\n"):
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = value.strip()
            elif key:
                headers.append((key, value.strip()))
        start_response(status, headers)
        return [payload]

    return app


def start_git_http_server(base_path: Path, *, username: str | None = None, password: str | None = None) -> GitHttpServer:
    """Serve BASE_PATH over smart HTTP on 127.0.0.1; with USERNAME, require Basic auth."""
    port = free_port()
    server = make_server(
        "127.0.0.1",
        port,
        _http_backend_app(base_path, username, password),
        server_class=_ThreadingWSGIServer,
        handler_class=_QuietHandler,
    )
    thread = threading.Thread(target=server.serve_forever, name="git-http", daemon=True)
    thread.start()
    wait_for_port(port)
    return GitHttpServer(base_path=base_path, port=port, server=server, thread=thread)


SSHD_BINARY = "/usr/sbin/sshd"


@dataclass
class GitSshServer:
    """A private sshd on 127.0.0.1 that accepts one key for the current user."""

    port: int
    user: str
    private_key: str
    known_hosts: str
    process: subprocess.Popen[bytes]

    def url(self, repo_path: Path) -> str:
        """Return the ssh:// URL of the repository at REPO_PATH."""
        return f"ssh://{self.user}@127.0.0.1:{self.port}{repo_path}"

    def stop(self) -> None:
        """Stop sshd and wait for it."""
        stop_process(self.process)


def sshd_available() -> bool:
    """Return whether OpenSSH's server and keygen are installed here."""
    return os.access(SSHD_BINARY, os.X_OK) and shutil.which("ssh-keygen") is not None


def start_git_ssh_server(root: Path) -> GitSshServer:
    """Start sshd on a free loopback port with a fresh host key and one authorised client key."""
    import getpass

    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o700)
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / name)], check=True, timeout=30)
    (root / "authorized_keys").write_text((root / "client_key.pub").read_text())
    os.chmod(root / "authorized_keys", 0o600)
    port = free_port()
    config = root / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {root / 'host_key'}\n"
        f"AuthorizedKeysFile {root / 'authorized_keys'}\nPidFile {root / 'sshd.pid'}\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
        "PermitRootLogin prohibit-password\nStrictModes no\nLogLevel ERROR\n"
    )
    # sshd insists on its privilege-separation folder, which Debian's service script creates.
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    log = open(root / "sshd.log", "wb")  # noqa: SIM115 - lives as long as the process
    process = subprocess.Popen([SSHD_BINARY, "-D", "-e", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port)
    except RuntimeError as exc:
        process.kill()
        raise RuntimeError(f"{exc}: {(root / 'sshd.log').read_text(errors='replace')[-1000:]}") from None
    host_key = (root / "host_key.pub").read_text().split()
    known_hosts = f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n"
    return GitSshServer(
        port=port,
        user=getpass.getuser(),
        private_key=(root / "client_key").read_text(),
        known_hosts=known_hosts,
        process=process,
    )
