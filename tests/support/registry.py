"""A real OCI registry on loopback (Debian's `docker-registry`) and hand-made images to push."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests

from kubesim.wait import WaitTimeout, wait_for
from tests.support.git import free_port, stop_process

REGISTRY_BINARY = "/usr/bin/docker-registry"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


def registry_available() -> bool:
    """Return whether Debian's docker-registry is installed here."""
    return os.access(REGISTRY_BINARY, os.X_OK)


@dataclass
class RegistryServer:
    """A running docker-registry on 127.0.0.1 with its own config and storage."""

    host: str
    root: Path
    process: subprocess.Popen[bytes]
    username: str | None = None
    password: str | None = None

    @property
    def url(self) -> str:
        """Return the registry's base URL."""
        return f"http://{self.host}"

    @property
    def auth(self) -> tuple[str, str] | None:
        """Return Basic credentials when the registry requires them."""
        if self.username is None or self.password is None:
            return None
        return (self.username, self.password)

    def stop(self) -> None:
        """Stop the registry, wait for it and remove its storage."""
        stop_process(self.process)
        shutil.rmtree(self.root, ignore_errors=True)


def _htpasswd_line(username: str, password: str) -> str:
    # docker-registry accepts only bcrypt; Debian's libxcrypt gives it to the crypt module.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt as _crypt

        # The lowest bcrypt cost: this registry only ever holds test passwords.
        hashed = _crypt.crypt(password, _crypt.mksalt(_crypt.METHOD_BLOWFISH, rounds=16))
    return f"{username}:{hashed}\n"


def start_registry(*, username: str | None = None, password: str | None = None, timeout: float = 15.0) -> RegistryServer:
    """Start docker-registry on a free loopback port, optionally with htpasswd auth."""
    port = free_port()
    root = Path(tempfile.mkdtemp(prefix="slipway-registry-"))
    (root / "storage").mkdir()
    auth = ""
    if username is not None:
        (root / "htpasswd").write_text(_htpasswd_line(username, password or ""))
        auth = f"auth:\n  htpasswd:\n    realm: slipway-test\n    path: {root / 'htpasswd'}\n"
    config = root / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log:\n  level: error\n  accesslog:\n    disabled: true\n"
        f"storage:\n  filesystem:\n    rootdirectory: {root / 'storage'}\n  delete:\n    enabled: true\n"
        f"http:\n  addr: 127.0.0.1:{port}\n  secret: slipway-test-only\n" + auth
    )
    log = open(root / "registry.log", "wb")  # noqa: SIM115 - lives as long as the process
    process = subprocess.Popen([REGISTRY_BINARY, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    server = RegistryServer(host=f"127.0.0.1:{port}", root=root, process=process, username=username, password=password)

    def answers() -> bool:
        if process.poll() is not None:
            output = (root / "registry.log").read_text(errors="replace")
            server.stop()
            raise RuntimeError(f"docker-registry exited: {output[-2000:]}")
        try:
            return requests.get(f"{server.url}/v2/", timeout=1).status_code in (200, 401)
        except requests.ConnectionError:
            return False

    try:
        wait_for(answers, timeout=timeout, interval=0.05, message=f"docker-registry to answer on {server.host}")
    except WaitTimeout as e:
        server.stop()
        raise RuntimeError(str(e)) from None
    return server


@contextmanager
def running_registry(**kwargs: str | None) -> Iterator[RegistryServer]:
    """Run a registry for the duration of the block."""
    server = start_registry(**kwargs)  # type: ignore[arg-type]
    try:
        yield server
    finally:
        server.stop()


def _layer(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, content in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(content)
            info.mtime = 0
            archive.addfile(info, io.BytesIO(content))
    # mtime=0 keeps the gzip bytes, and so the digests, the same for the same content.
    return gzip.compress(buffer.getvalue(), mtime=0)


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class OciImage:
    """A tiny single-layer OCI image held in memory."""

    manifest: bytes
    config: bytes
    layer: bytes

    @property
    def digest(self) -> str:
        """Return the manifest digest, the one a registry reports for its tag."""
        return _sha256(self.manifest)


def make_image(files: dict[str, bytes] | None = None, *, cmd: list[str] | None = None) -> OciImage:
    """Make a one-layer OCI image with FILES, without Docker or any builder."""
    layer = _layer(files or {"hello.txt": b"hello\n"})
    diff_id = _sha256(gzip.decompress(layer))
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Cmd": cmd or ["/bin/true"]},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        },
        sort_keys=True,
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": _sha256(config), "size": len(config)},
            "layers": [{"mediaType": OCI_LAYER, "digest": _sha256(layer), "size": len(layer)}],
        },
        sort_keys=True,
    ).encode()
    return OciImage(manifest=manifest, config=config, layer=layer)


def _upload_blob(session: requests.Session, base: str, name: str, blob: bytes) -> None:
    digest = _sha256(blob)
    if session.head(f"{base}/v2/{name}/blobs/{digest}", timeout=10).status_code == 200:
        return
    start = session.post(f"{base}/v2/{name}/blobs/uploads/", timeout=10)
    start.raise_for_status()
    location = start.headers["Location"]
    if location.startswith("/"):
        location = base + location
    separator = "&" if "?" in location else "?"
    done = session.put(
        f"{location}{separator}digest={digest}",
        data=blob,
        headers={"Content-Type": "application/octet-stream"},
        timeout=30,
    )
    done.raise_for_status()


def push_image(registry: RegistryServer, name: str, tag: str, image: OciImage | None = None) -> str:
    """Push IMAGE (a fresh tiny one by default) as NAME:TAG through the registry API; return its digest."""
    image = image or make_image()
    session = requests.Session()
    session.trust_env = False
    if registry.auth:
        session.auth = registry.auth
    try:
        _upload_blob(session, registry.url, name, image.layer)
        _upload_blob(session, registry.url, name, image.config)
        response = session.put(
            f"{registry.url}/v2/{name}/manifests/{tag}",
            data=image.manifest,
            headers={"Content-Type": OCI_MANIFEST},
            timeout=10,
        )
        response.raise_for_status()
    finally:
        session.close()
    reported = response.headers.get("Docker-Content-Digest", image.digest)
    if reported != image.digest:
        raise RuntimeError(f"registry stored {reported}, expected {image.digest}")
    return image.digest


def write_oci_layout(directory: Path, tag: str, image: OciImage) -> Path:
    """Write IMAGE as an OCI image layout under DIRECTORY (for `skopeo copy oci:DIR:TAG`)."""
    blobs = directory / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    for blob in (image.layer, image.config, image.manifest):
        (blobs / hashlib.sha256(blob).hexdigest()).write_bytes(blob)
    (directory / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "mediaType": OCI_MANIFEST,
                "digest": image.digest,
                "size": len(image.manifest),
                "annotations": {"org.opencontainers.image.ref.name": tag},
            }
        ],
    }
    (directory / "index.json").write_text(json.dumps(index))
    return directory


def skopeo_push(registry: RegistryServer, directory: Path, name: str, tag: str) -> None:
    """Push an OCI layout with skopeo, as the testbed notes describe."""
    command = [
        "skopeo",
        "copy",
        "--quiet",
        "--dest-tls-verify=false",
        f"oci:{directory}:{tag}",
        f"docker://{registry.host}/{name}:{tag}",
    ]
    if registry.auth:
        command[4:4] = ["--dest-creds", f"{registry.auth[0]}:{registry.auth[1]}"]
    subprocess.run(command, check=True, capture_output=True, timeout=60)


def docker_config_json(registry: RegistryServer) -> str:
    """Return a dockerconfigjson document for REGISTRY's credentials."""
    auths = {}
    if registry.auth:
        token = base64.b64encode(f"{registry.auth[0]}:{registry.auth[1]}".encode()).decode()
        auths[registry.host] = {"auth": token}
    return json.dumps({"auths": auths})
