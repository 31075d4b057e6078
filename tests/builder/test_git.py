"""Branch resolution and commit details against real repositories served on loopback."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from builder.git import Commit, GitCredentials, GitError, commit_details, ls_remote, redact_url
from tests.builder.conftest import GIT_TOKEN, GIT_USER, GitServers
from tests.support.git import GitSshServer, make_repo, push_commit, start_git_daemon

TOKEN = GitCredentials(kind="token", username=GIT_USER, password=GIT_TOKEN)


def test_it_resolves_a_branch_over_the_git_protocol(git_servers: GitServers) -> None:
    commit = ls_remote(git_servers.daemon.url("shop.git"), "main")
    assert commit == Commit(sha=git_servers.repo.head("main"))


def test_it_resolves_a_branch_with_a_slash_in_its_name(git_servers: GitServers) -> None:
    commit = ls_remote(git_servers.daemon.url("shop.git"), "feature/login")
    assert commit.sha == git_servers.repo.head("feature/login")


def test_it_resolves_a_branch_from_a_local_path(git_servers: GitServers) -> None:
    assert ls_remote(str(git_servers.repo.path), "main").sha == git_servers.repo.head("main")


def test_it_sees_a_new_push(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    daemon = start_git_daemon(tmp_path)
    try:
        before = ls_remote(daemon.url("shop.git"), "main").sha
        after = push_commit(repo, "main", {"new.txt": "new\n"}, "Add new")
        assert ls_remote(daemon.url("shop.git"), "main").sha == after != before
    finally:
        daemon.stop()


def test_it_uses_a_token_over_https_style_basic_auth(git_servers: GitServers) -> None:
    commit = ls_remote(git_servers.http.url("shop.git"), "main", credentials=TOKEN)
    assert commit.sha == git_servers.repo.head("main")


@pytest.mark.parametrize("credentials", [None, GitCredentials(kind="token", username=GIT_USER, password="wrong")])
def test_without_the_right_token_the_repository_is_not_found_or_denied(
    git_servers: GitServers, credentials: GitCredentials | None
) -> None:
    url = git_servers.http.url("shop.git")
    with pytest.raises(GitError) as info:
        ls_remote(url, "main", credentials=credentials)
    assert info.value.message == f"repository {url} not found or access denied"
    assert info.value.permanent is True


def test_an_unknown_branch_is_named(git_servers: GitServers) -> None:
    url = git_servers.daemon.url("shop.git")
    with pytest.raises(GitError) as info:
        ls_remote(url, "mian")
    assert info.value.message == f"branch `mian` not found in {url}"
    assert info.value.permanent is True


def test_a_branch_that_only_ends_like_the_name_does_not_match(git_servers: GitServers) -> None:
    with pytest.raises(GitError, match="branch `login` not found"):
        ls_remote(git_servers.daemon.url("shop.git"), "login")


def test_an_unknown_repository_is_not_found_or_denied(git_servers: GitServers) -> None:
    url = git_servers.daemon.url("nope.git")
    with pytest.raises(GitError) as info:
        ls_remote(url, "main")
    assert info.value.message == f"repository {url} not found or access denied"


def test_a_server_that_refuses_connections_is_unreachable_and_worth_retrying() -> None:
    with pytest.raises(GitError) as info:
        ls_remote("git://127.0.0.1:9/shop.git", "main")
    assert info.value.message == "repository unreachable: git://127.0.0.1:9/shop.git (connection refused)"
    assert info.value.permanent is False


def test_a_server_that_never_answers_times_out() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        accepted: list[socket.socket] = []
        thread = threading.Thread(target=lambda: accepted.append(listener.accept()[0]), daemon=True)
        thread.start()
        with pytest.raises(GitError) as info:
            ls_remote(f"git://127.0.0.1:{port}/shop.git", "main", timeout=0.5)
        for conn in accepted:
            conn.close()
    assert info.value.message == f"repository git://127.0.0.1:{port}/shop.git did not answer within 0.5 s"
    assert info.value.permanent is False


def test_user_info_never_reaches_a_message() -> None:
    with pytest.raises(GitError) as info:
        ls_remote("http://alice:ghp_secret@127.0.0.1:9/acme/shop.git", "main")
    assert "ghp_secret" not in info.value.message
    assert redact_url("https://x-access-token:abc@github.com/a/b.git") == "https://github.com/a/b.git"


def test_commit_details_reads_message_and_author(git_servers: GitServers) -> None:
    sha = git_servers.repo.head("main")
    commit = commit_details(git_servers.daemon.url("shop.git"), sha)
    assert commit is not None
    assert commit.sha == sha
    assert commit.message == "Say hello\n\nA longer body."
    assert commit.subject == "Say hello"
    assert (commit.author_name, commit.author_email) == ("Alice Example", "alice@example.com")
    assert commit.committed_at is not None


def test_commit_details_works_with_a_token(git_servers: GitServers) -> None:
    sha = git_servers.repo.commits["main"][0]
    commit = commit_details(git_servers.http.url("shop.git"), sha, credentials=TOKEN)
    assert commit is not None and commit.subject == "Start the shop"


def test_commit_details_is_none_when_the_remote_cannot_tell(git_servers: GitServers) -> None:
    assert commit_details(git_servers.daemon.url("shop.git"), "a" * 40) is None
    assert commit_details("git://127.0.0.1:9/shop.git", git_servers.repo.head()) is None
    assert commit_details(git_servers.daemon.url("shop.git"), "not-a-sha") is None


def test_credentials_never_show_in_repr() -> None:
    text = repr(GitCredentials(kind="ssh", private_key="-----BEGIN OPENSSH PRIVATE KEY-----", known_hosts="h"))
    assert "PRIVATE KEY" not in text
    assert GIT_TOKEN not in repr(TOKEN)


def test_credentials_become_the_keys_the_clone_step_reads() -> None:
    assert TOKEN.as_secret_data() == {"username": GIT_USER, "password": GIT_TOKEN}
    ssh = GitCredentials(kind="ssh", private_key="KEY", known_hosts="github.com ssh-ed25519 AAAA")
    assert ssh.as_secret_data() == {"ssh-privatekey": "KEY\n", "known_hosts": "github.com ssh-ed25519 AAAA"}


def test_it_uses_a_deploy_key_over_ssh_and_checks_the_host_key(git_servers: GitServers, git_ssh: GitSshServer) -> None:
    key = GitCredentials(kind="ssh", private_key=git_ssh.private_key, known_hosts=git_ssh.known_hosts)
    url = git_ssh.url(git_servers.repo.path)
    assert ls_remote(url, "main", credentials=key).sha == git_servers.repo.head()
    details = commit_details(url, git_servers.repo.head(), credentials=key)
    assert details is not None and details.subject == "Say hello"


def test_a_deploy_key_without_known_hosts_trusts_the_host_on_first_use(git_servers: GitServers, git_ssh: GitSshServer) -> None:
    key = GitCredentials(kind="ssh", private_key=git_ssh.private_key)
    assert ls_remote(git_ssh.url(git_servers.repo.path), "main", credentials=key).sha == git_servers.repo.head()


def test_a_host_key_that_does_not_match_is_refused(git_servers: GitServers, git_ssh: GitSshServer) -> None:
    other = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
    key = GitCredentials(kind="ssh", private_key=git_ssh.private_key, known_hosts=f"[127.0.0.1]:{git_ssh.port} {other}\n")
    with pytest.raises(GitError) as info:
        ls_remote(git_ssh.url(git_servers.repo.path), "main", credentials=key)
    assert info.value.message.startswith("the SSH host key of ssh://127.0.0.1:")
    assert info.value.permanent is True


def test_without_a_key_ssh_access_is_denied(git_servers: GitServers, git_ssh: GitSshServer) -> None:
    with pytest.raises(GitError, match="not found or access denied"):
        ls_remote(git_ssh.url(git_servers.repo.path), "main")
