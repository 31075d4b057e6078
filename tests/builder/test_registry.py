"""The registry client against a real docker-registry, and the token flow against a small token server."""

from __future__ import annotations

import hashlib
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from builder.registry import (
    ImageReference,
    RegistryCredentials,
    RegistryError,
    _Client,
    parse_image_reference,
    pinned,
    resolve_digest,
)
from tests.support.registry import (
    RegistryServer,
    make_image,
    push_image,
    skopeo_push,
    start_registry,
    write_oci_layout,
)


def test_it_resolves_a_tag_to_the_digest_of_what_was_pushed(oci_registry: RegistryServer) -> None:
    digest = push_image(oci_registry, "resolve/one", "v1", make_image({"a.txt": b"one"}))
    assert resolve_digest(f"{oci_registry.host}/resolve/one", "v1") == digest


def test_it_follows_a_tag_that_moves_to_another_image(oci_registry: RegistryServer) -> None:
    first = push_image(oci_registry, "resolve/moving", "latest", make_image({"a.txt": b"A"}))
    assert resolve_digest(f"{oci_registry.host}/resolve/moving", "latest") == first
    second = push_image(oci_registry, "resolve/moving", "latest", make_image({"a.txt": b"B"}))
    assert second != first
    assert resolve_digest(f"{oci_registry.host}/resolve/moving", "latest") == second


def test_it_reads_the_tag_from_the_image_when_none_is_given(oci_registry: RegistryServer) -> None:
    digest = push_image(oci_registry, "resolve/inline", "v2", make_image({"a.txt": b"inline"}))
    assert resolve_digest(f"{oci_registry.host}/resolve/inline:v2") == digest


def test_it_resolves_an_image_pushed_by_skopeo_from_an_oci_layout(oci_registry: RegistryServer, tmp_path: Path) -> None:
    image = make_image({"a.txt": b"skopeo"})
    skopeo_push(oci_registry, write_oci_layout(tmp_path / "layout", "v3", image), "resolve/skopeo", "v3")
    assert resolve_digest(f"{oci_registry.host}/resolve/skopeo", "v3") == image.digest


def test_an_unknown_tag_is_not_found_for_good(oci_registry: RegistryServer) -> None:
    push_image(oci_registry, "resolve/known", "v1")
    with pytest.raises(RegistryError) as info:
        resolve_digest(f"{oci_registry.host}/resolve/known", "v2")
    assert info.value.message == f"image {oci_registry.host}/resolve/known:v2 not found"
    assert info.value.permanent is True


def test_an_unknown_repository_is_not_found(oci_registry: RegistryServer) -> None:
    with pytest.raises(RegistryError, match="not found") as info:
        resolve_digest(f"{oci_registry.host}/resolve/never-pushed", "latest")
    assert info.value.permanent is True


def test_a_registry_that_is_down_is_unreachable_and_worth_retrying() -> None:
    server = start_registry()
    host = server.host
    server.stop()
    with pytest.raises(RegistryError) as info:
        resolve_digest(f"{host}/shop", "v2")
    assert info.value.message == f"registry {host} unreachable: connection refused"
    assert info.value.permanent is False


def test_it_uses_basic_credentials_when_the_registry_asks(private_registry: RegistryServer) -> None:
    digest = push_image(private_registry, "acme/shop", "v1", make_image({"a.txt": b"private"}))
    credentials = RegistryCredentials("alice", "s3cret")
    assert resolve_digest(f"{private_registry.host}/acme/shop", "v1", credentials=credentials) == digest


@pytest.mark.parametrize("credentials", [None, RegistryCredentials("alice", "wrong")])
def test_without_the_right_credentials_access_is_denied(
    private_registry: RegistryServer, credentials: RegistryCredentials | None
) -> None:
    push_image(private_registry, "acme/denied", "v1")
    with pytest.raises(RegistryError) as info:
        resolve_digest(f"{private_registry.host}/acme/denied", "v1", credentials=credentials)
    assert info.value.message == f"access denied to {private_registry.host}/acme/denied"
    assert info.value.permanent is True


def test_credentials_never_show_in_repr() -> None:
    assert "s3cret" not in repr(RegistryCredentials("alice", "s3cret"))


# ---- the Bearer token flow (Docker Hub, GHCR) against a small token-issuing registry ------------

MANIFEST = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []}).encode()
MANIFEST_DIGEST = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()


class TokenRegistry(BaseHTTPRequestHandler):
    """Answers like ghcr.io: 401 with a Bearer challenge, a token service, then the manifest."""

    require_basic: str | None = None
    send_digest_on_head = True
    seen: list[str] = []

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        return

    def _challenge(self) -> None:
        host = self.headers["Host"]
        self.send_response(401)
        self.send_header(
            "WWW-Authenticate",
            f'Bearer realm="http://{host}/token",service="test-registry",scope="repository:acme/shop:pull"',
        )
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _manifest(self, body: bool) -> None:
        self.seen.append(f"{self.command} {self.path} {self.headers.get('Accept', '')}")
        if self.headers.get("Authorization") != "Bearer t0ken":
            self._challenge()
            return
        if not self.path.startswith("/v2/acme/shop/manifests/"):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.oci.image.index.v1+json")
        self.send_header("Content-Length", str(len(MANIFEST)))
        # Some registries leave the digest header out; the client must then hash the body.
        if self.send_digest_on_head:
            self.send_header("Docker-Content-Digest", MANIFEST_DIGEST)
        self.end_headers()
        if body:
            self.wfile.write(MANIFEST)

    def do_HEAD(self) -> None:  # noqa: N802 - stdlib naming
        self._manifest(body=False)

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        if self.path.startswith("/token"):
            self.seen.append(f"GET {self.path}")
            if self.require_basic and self.headers.get("Authorization") != self.require_basic:
                self.send_response(401)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            payload = json.dumps({"token": "t0ken", "expires_in": 300}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self._manifest(body=True)


@pytest.fixture
def token_registry() -> Iterator[tuple[str, type[TokenRegistry]]]:
    handler = type("Handler", (TokenRegistry,), {"seen": [], "require_basic": None, "send_digest_on_head": True})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


def test_it_gets_an_anonymous_bearer_token_for_the_repository_scope(token_registry: tuple[str, type[TokenRegistry]]) -> None:
    host, handler = token_registry
    assert resolve_digest(f"{host}/acme/shop", "v1") == MANIFEST_DIGEST
    token_requests = [line for line in handler.seen if line.startswith("GET /token")]
    assert token_requests == ["GET /token?scope=repository%3Aacme%2Fshop%3Apull&service=test-registry"]
    assert "application/vnd.oci.image.index.v1+json" in handler.seen[0]
    assert "application/vnd.docker.distribution.manifest.v2+json" in handler.seen[0]


def test_it_sends_credentials_only_to_the_token_service(token_registry: tuple[str, type[TokenRegistry]]) -> None:
    host, handler = token_registry
    handler.require_basic = "Basic YWxpY2U6czNjcmV0"  # alice:s3cret
    credentials = RegistryCredentials("alice", "s3cret")
    assert resolve_digest(f"{host}/acme/shop", "v1", credentials=credentials) == MANIFEST_DIGEST
    with pytest.raises(RegistryError, match=f"access denied to {host}/acme/shop"):
        resolve_digest(f"{host}/acme/shop", "v1")


def test_without_a_digest_header_it_hashes_the_manifest_it_gets(token_registry: tuple[str, type[TokenRegistry]]) -> None:
    host, handler = token_registry
    handler.send_digest_on_head = False
    assert resolve_digest(f"{host}/acme/shop", "v1") == MANIFEST_DIGEST
    assert any(line.startswith("GET /v2/acme/shop/manifests/v1") for line in handler.seen)


def test_a_registry_that_never_answers_times_out_and_is_worth_retrying() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        host = f"127.0.0.1:{listener.getsockname()[1]}"
        with pytest.raises(RegistryError) as info:
            resolve_digest(f"{host}/shop", "v1", timeout=0.3)
    assert info.value.message == f"registry {host} did not answer within 0.3 s"
    assert info.value.permanent is False


# ---- names -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("nginx", ImageReference("docker.io", "library/nginx")),
        ("nginx:1.27", ImageReference("docker.io", "library/nginx", tag="1.27")),
        ("bitnami/redis:7.2", ImageReference("docker.io", "bitnami/redis", tag="7.2")),
        ("docker.io/library/nginx", ImageReference("docker.io", "library/nginx")),
        ("index.docker.io/nginx", ImageReference("docker.io", "library/nginx")),
        ("ghcr.io/acme/shop:v2", ImageReference("ghcr.io", "acme/shop", tag="v2")),
        ("127.0.0.1:5000/shop", ImageReference("127.0.0.1:5000", "shop")),
        ("localhost/team/shop:v1", ImageReference("localhost", "team/shop", tag="v1")),
        (f"ghcr.io/acme/shop@sha256:{'a' * 64}", ImageReference("ghcr.io", "acme/shop", digest=f"sha256:{'a' * 64}")),
    ],
)
def test_it_splits_image_names_like_docker_does(image: str, expected: ImageReference) -> None:
    assert parse_image_reference(image) == expected


def test_docker_hub_is_served_by_its_own_api_host() -> None:
    assert parse_image_reference("nginx").api_host == "registry-1.docker.io"
    assert parse_image_reference("ghcr.io/acme/shop").api_host == "ghcr.io"


@pytest.mark.parametrize(
    ("image", "insecure", "base"),
    [
        ("127.0.0.1:5000/shop", (), "http://127.0.0.1:5000"),
        ("localhost:5000/shop", (), "http://localhost:5000"),
        ("registry.internal:5000/shop", ("registry.internal:5000",), "http://registry.internal:5000"),
        ("ghcr.io/acme/shop", (), "https://ghcr.io"),
        ("nginx", (), "https://registry-1.docker.io"),
    ],
)
def test_plain_http_is_only_for_loopback_and_listed_insecure_hosts(image: str, insecure: tuple[str, ...], base: str) -> None:
    client = _Client(parse_image_reference(image), display=image, credentials=None, insecure_hosts=insecure, timeout=1)
    assert client.base == base
    client.session.close()


def test_pinned_replaces_the_tag_with_the_digest() -> None:
    digest = "sha256:" + "c" * 64
    assert pinned("127.0.0.1:5000/shop:latest", digest) == f"127.0.0.1:5000/shop@{digest}"
    assert pinned("127.0.0.1:5000/shop", digest) == f"127.0.0.1:5000/shop@{digest}"
