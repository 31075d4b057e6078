"""A small thread-safe JSON client for the Kubernetes API, used inside the simulated kubelet.

The kubelet works on raw API dicts (camelCase, as a real kubelet writes them) and runs many
threads, so it uses urllib3's thread-safe pool directly instead of the generated client.
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import urllib3
import yaml


class KubeError(Exception):
    """An API error; `status` is the HTTP status (0 when the server could not be reached)."""

    def __init__(self, status: int, message: str, reason: str = "") -> None:
        super().__init__(f"{status} {reason}: {message}" if reason else f"{status}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def retryable(self) -> bool:
        """Return True when trying again later may succeed."""
        return self.status == 0 or self.status == 429 or self.status >= 500


class Kube:
    """JSON requests with a bearer token against one apiserver; every call has a timeout."""

    def __init__(self, server: str, token: str, ca_file: str, *, timeout: float = 15.0) -> None:
        self.server = server.rstrip("/")
        self.timeout = timeout
        self.headers = {"Authorization": f"Bearer {token}", "Accept": "application/json", "User-Agent": "kubesim-kubelet/1.20.2"}
        self.pool = urllib3.PoolManager(num_pools=4, maxsize=32, cert_reqs="CERT_REQUIRED", ca_certs=ca_file, retries=False)

    @classmethod
    def from_kubeconfig(cls, path: str | Path, *, ca_file: str | None = None, **kw: Any) -> Kube:
        """Build a client from a kubeconfig with a token user and a CA file or embedded CA data."""
        cfg = yaml.safe_load(Path(path).read_text())
        ctx_name = cfg["current-context"]
        ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in cfg["users"] if u["name"] == ctx["user"])
        ca_file = ca_file or cluster.get("certificate-authority")
        if not ca_file:
            # urllib3 reads the CA file for every new connection: keep it until this process ends.
            with tempfile.NamedTemporaryFile(prefix="kubesim-ca-", suffix=".crt", delete=False) as fh:
                fh.write(base64.b64decode(cluster["certificate-authority-data"]))
            ca_file = fh.name
            atexit.register(os.unlink, ca_file)
        return cls(cluster["server"], user["token"], ca_file, **kw)

    def _url(self, path: str, params: dict[str, Any] | None) -> str:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        return self.server + path + (("?" + urlencode(query)) if query else "")

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Send one request and return the decoded JSON answer, raising KubeError on failure."""
        headers = dict(self.headers)
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body).encode()
        try:
            resp = self.pool.request(
                method,
                self._url(path, params),
                body=data,
                headers=headers,
                timeout=urllib3.Timeout(total=timeout or self.timeout),
            )
        except urllib3.exceptions.HTTPError as exc:
            raise KubeError(0, str(exc), "Unreachable") from exc
        payload: dict[str, Any] = {}
        if resp.data:
            try:
                payload = json.loads(resp.data)
            except ValueError:
                payload = {"message": resp.data.decode(errors="replace")}
        if resp.status >= 400:
            raise KubeError(resp.status, payload.get("message", ""), payload.get("reason", ""))
        return payload

    def get(self, path: str, **kw: Any) -> dict[str, Any]:
        return self.request("GET", path, **kw)

    def watch(self, path: str, params: dict[str, Any], *, timeout_seconds: int = 240) -> Iterator[dict[str, Any]]:
        """Yield watch events as dicts until the server ends the watch."""
        query = dict(params, watch="true", timeoutSeconds=timeout_seconds)
        try:
            resp = self.pool.request(
                "GET",
                self._url(path, query),
                headers=self.headers,
                preload_content=False,
                # Bookmarks and the server-side timeout keep the stream alive; a read stalled
                # past both means the connection is dead.
                timeout=urllib3.Timeout(connect=10, read=timeout_seconds + 30),
            )
        except urllib3.exceptions.HTTPError as exc:
            raise KubeError(0, str(exc), "Unreachable") from exc
        try:
            if resp.status >= 400:
                data = resp.read()
                try:
                    payload = json.loads(data)
                except ValueError:
                    payload = {"message": data.decode(errors="replace")}
                raise KubeError(resp.status, payload.get("message", ""), payload.get("reason", ""))
            buf = b""
            try:
                for chunk in resp.stream(65536):
                    buf += chunk
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        if line.strip():
                            yield json.loads(line)
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                raise KubeError(0, str(exc), "WatchBroken") from exc
        finally:
            resp.release_conn()
