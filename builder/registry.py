"""A small OCI distribution client: resolve an image tag to the digest it points at now."""

from __future__ import annotations

import base64
import errno
import hashlib
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import requests

# Every manifest kind a tag may point at, so the registry never downgrades or converts it
# (a converted manifest would have another digest than the one the cluster pulls).
MANIFEST_ACCEPT = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)
DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
USER_AGENT = "slipway-registry-client/1"

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')


class RegistryError(Exception):
    """A registry could not resolve an image; `permanent` says whether a retry can help."""

    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent


@dataclass(frozen=True)
class RegistryCredentials:
    """A username and password or token for one registry; the secret never shows in repr."""

    username: str
    password: str = field(repr=False)


@dataclass(frozen=True)
class ImageReference:
    """An image name split the way the distribution API needs it."""

    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    @property
    def api_host(self) -> str:
        """Return the host that serves the registry API (Docker Hub has its own)."""
        return DOCKER_HUB_API if self.registry == DOCKER_HUB else self.registry

    @property
    def reference(self) -> str:
        """Return the digest if pinned, else the tag."""
        return self.digest or self.tag or "latest"


def parse_image_reference(image: str) -> ImageReference:
    """Split IMAGE (`nginx`, `ghcr.io/acme/shop:v2`, `127.0.0.1:5000/shop@sha256:…`)."""
    name, digest = image, None
    if "@" in name:
        name, digest = name.split("@", 1)
        if not _DIGEST.match(digest):
            raise RegistryError(f"image {image} has an invalid digest", permanent=True)
    tag = None
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = name.rsplit(":", 1)
    first, _, rest = name.partition("/")
    # Docker's rule: the first component is a registry when it looks like a host.
    if rest and ("." in first or ":" in first or first == "localhost"):
        registry, repository = first, rest
    else:
        registry, repository = DOCKER_HUB, name
    if registry in ("index.docker.io", "registry-1.docker.io"):
        registry = DOCKER_HUB
    if registry == DOCKER_HUB and "/" not in repository:
        repository = f"library/{repository}"
    if not repository or repository != repository.lower():
        raise RegistryError(f"image name {image!r} is not valid", permanent=True)
    if tag is not None and not _TAG.match(tag):
        raise RegistryError(f"tag {tag!r} of {image} is not valid", permanent=True)
    return ImageReference(registry=registry, repository=repository, tag=tag, digest=digest)


def _is_loopback(host: str) -> bool:
    hostname = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    hostname = hostname.strip("[]")
    if hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(hostname).is_loopback
    except ValueError:
        return False


def _reason(exc: BaseException) -> str:
    # Walk the chain of causes down to the socket error and name it in plain words.
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        number = getattr(current, "errno", None)
        if number == errno.ECONNREFUSED:
            return "connection refused"
        if number in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return "network unreachable"
        if number == errno.ECONNRESET:
            return "connection reset"
        text = str(current).lower()
        if "connection refused" in text:
            return "connection refused"
        if "name or service not known" in text or "nodename nor servname" in text or "name resolution" in text:
            return "host name not resolved"
        if "timed out" in text:
            return "connection timed out"
        current = (
            current.__cause__
            or current.__context__
            or (current.args[0] if current.args and isinstance(current.args[0], BaseException) else None)
        )
    return str(exc).split(": ", 1)[-1][:200] or type(exc).__name__


class _Client:
    """One resolution: a session, the scheme to use, and the authorization earned so far."""

    def __init__(
        self,
        ref: ImageReference,
        *,
        display: str,
        credentials: RegistryCredentials | None,
        insecure_hosts: Iterable[str],
        timeout: float,
    ) -> None:
        self.ref = ref
        self.display = display
        self.repository_display = _name_only(display)
        self.credentials = credentials
        self.timeout = timeout
        plain = ref.registry in set(insecure_hosts) or _is_loopback(ref.registry)
        self.base = f"{'http' if plain else 'https'}://{ref.api_host}"
        self.session = requests.Session()
        self.session.headers["User-Agent"] = USER_AGENT
        # Proxies and netrc from the worker's environment must not see user credentials.
        self.session.trust_env = False
        self.authorization: str | None = None

    def request(self, method: str, url: str, **kwargs: object) -> requests.Response:
        try:
            return self.session.request(method, url, timeout=self.timeout, allow_redirects=True, **kwargs)  # type: ignore[arg-type]
        except requests.exceptions.SSLError as exc:
            raise RegistryError(f"registry {self.ref.registry} failed the TLS handshake: {_reason(exc)}", permanent=True) from exc
        except requests.exceptions.Timeout as exc:
            raise RegistryError(
                f"registry {self.ref.registry} did not answer within {self.timeout:g} s", permanent=False
            ) from exc
        except requests.exceptions.ConnectionError as exc:
            raise RegistryError(f"registry {self.ref.registry} unreachable: {_reason(exc)}", permanent=False) from exc
        except requests.exceptions.RequestException as exc:
            raise RegistryError(f"registry {self.ref.registry} request failed: {_reason(exc)}", permanent=False) from exc

    def manifest(self, method: str) -> requests.Response:
        url = f"{self.base}/v2/{self.ref.repository}/manifests/{self.ref.reference}"
        headers = {"Accept": MANIFEST_ACCEPT}
        if self.authorization:
            headers["Authorization"] = self.authorization
        response = self.request(method, url, headers=headers)
        if response.status_code == 401 and self.authorization is None:
            self.authorization = self.authorize(response.headers.get("WWW-Authenticate", ""))
            if self.authorization is not None:
                headers["Authorization"] = self.authorization
                response = self.request(method, url, headers=headers)
        return response

    def authorize(self, challenge: str) -> str | None:
        """Answer a 401 challenge: Bearer through the token service, or Basic directly."""
        scheme, _, params_text = challenge.partition(" ")
        params = dict(_CHALLENGE_PARAM.findall(params_text))
        if scheme.lower() == "basic":
            if self.credentials is None:
                return None
            pair = f"{self.credentials.username}:{self.credentials.password}".encode()
            return "Basic " + base64.b64encode(pair).decode()
        if scheme.lower() != "bearer" or "realm" not in params:
            return None
        query = {"scope": f"repository:{self.ref.repository}:pull"}
        if "service" in params:
            query["service"] = params["service"]
        auth = (self.credentials.username, self.credentials.password) if self.credentials else None
        response = self.request("GET", params["realm"], params=query, auth=auth)
        if response.status_code in (401, 403):
            raise RegistryError(f"access denied to {self.repository_display}", permanent=True)
        if response.status_code != 200:
            raise self.status_error(response)
        try:
            body = response.json()
        except ValueError:
            body = {}
        token = body.get("token") or body.get("access_token") if isinstance(body, dict) else None
        if not token:
            raise RegistryError(f"registry {self.ref.registry} issued no token", permanent=False)
        return f"Bearer {token}"

    def status_error(self, response: requests.Response) -> RegistryError:
        status = response.status_code
        if status == 404:
            return RegistryError(f"image {self.display} not found", permanent=True)
        if status in (401, 403):
            return RegistryError(f"access denied to {self.repository_display}", permanent=True)
        if status == 429:
            return RegistryError(f"registry {self.ref.registry} is rate limiting requests; try again later", permanent=False)
        if status >= 500:
            return RegistryError(f"registry {self.ref.registry} failed with HTTP {status}", permanent=False)
        return RegistryError(f"registry {self.ref.registry} answered HTTP {status} for {self.display}", permanent=True)


def resolve_digest(
    image: str,
    tag: str | None = None,
    *,
    credentials: RegistryCredentials | None = None,
    insecure_hosts: Iterable[str] = (),
    timeout: float = 10.0,
) -> str:
    """Return the digest IMAGE:TAG points at now, as `sha256:…`.

    Plain HTTP is used for loopback registries and for the hosts in INSECURE_HOSTS.
    """
    ref = parse_image_reference(image)
    if tag:
        if ref.tag or ref.digest:
            raise RegistryError(f"image {image} already names a tag or digest", permanent=True)
        if _DIGEST.match(tag):
            ref = ImageReference(ref.registry, ref.repository, digest=tag)
        elif _TAG.match(tag):
            ref = ImageReference(ref.registry, ref.repository, tag=tag)
        else:
            raise RegistryError(f"tag {tag!r} of {image} is not valid", permanent=True)
    display = f"{image}:{tag}" if tag and not _DIGEST.match(tag) else f"{image}@{tag}" if tag else image
    client = _Client(ref, display=display, credentials=credentials, insecure_hosts=insecure_hosts, timeout=timeout)
    try:
        response = client.manifest("HEAD")
        # Some registries refuse HEAD or omit the digest header on it; GET always works.
        digest = response.headers.get("Docker-Content-Digest", "") if response.status_code == 200 else ""
        if _DIGEST.match(digest):
            return digest
        if response.status_code not in (200, 405):
            raise client.status_error(response)
        response = client.manifest("GET")
        if response.status_code != 200:
            raise client.status_error(response)
        digest = response.headers.get("Docker-Content-Digest", "")
        if _DIGEST.match(digest):
            return digest
        return "sha256:" + hashlib.sha256(response.content).hexdigest()
    finally:
        client.session.close()


def pinned(image: str, digest: str) -> str:
    """Return IMAGE (tag stripped) pinned as `IMAGE@sha256:…`."""
    if not _DIGEST.match(digest):
        raise ValueError(f"{digest!r} is not a sha256 digest")
    return f"{_name_only(image)}@{digest}"


def _name_only(image: str) -> str:
    """Return IMAGE without its tag or digest."""
    name = image.split("@", 1)[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name = name.rsplit(":", 1)[0]
    return name
