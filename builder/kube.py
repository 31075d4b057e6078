"""The cluster: the only module that imports ``kubernetes``.

Everything Slipway does to a cluster goes through ``Cluster``: server-side apply
with one field manager, deletes that ignore what is already gone, reads, watches
with resource versions and bookmarks, pod log streams and a Lease for leader
election. Objects go in and come out as plain dicts (the API's JSON), so the
rendering and classification code stays pure. Every call has a timeout and raises
``ClusterError``, which says whether trying again can help.

``RBAC_RULES`` lists exactly the verbs on exactly the resources these calls use;
platform/ grants those and no more (a test keeps the two in step).
"""

from __future__ import annotations

import builtins
import json
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)

FIELD_MANAGER = "slipway"
DEFAULT_TIMEOUT = 15.0
# The server ends a watch after this long; the client gives up a little later.
WATCH_SECONDS = 240

Obj = dict[str, Any]


@dataclass(frozen=True)
class Kind:
    api_version: str
    kind: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        prefix = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if self.namespaced and namespace:
            prefix += f"/namespaces/{quote(namespace)}"
        path = f"{prefix}/{self.plural}"
        return f"{path}/{quote(name)}" if name else path


KINDS = {
    k.kind: k
    for k in [
        Kind("v1", "Namespace", "namespaces", namespaced=False),
        Kind("v1", "Secret", "secrets"),
        Kind("v1", "ConfigMap", "configmaps"),
        Kind("v1", "Service", "services"),
        Kind("v1", "Pod", "pods"),
        Kind("apps/v1", "Deployment", "deployments"),
        Kind("apps/v1", "ReplicaSet", "replicasets"),
        Kind("batch/v1", "Job", "jobs"),
        Kind("networking.k8s.io/v1", "Ingress", "ingresses"),
        Kind("coordination.k8s.io/v1", "Lease", "leases"),
        Kind("v1", "Event", "events"),
    ]
}

# (API group, resource, verbs): what the calls below need, and all platform/ grants.
RBAC_RULES: list[tuple[str, str, tuple[str, ...]]] = [
    # apply (server-side apply creates as well as patches), list to prune, delete
    ("", "namespaces", ("create", "patch", "delete")),
    ("", "secrets", ("create", "patch", "list", "delete")),
    ("", "services", ("create", "patch", "list", "delete")),
    ("networking.k8s.io", "ingresses", ("create", "patch", "list", "delete")),
    ("apps", "deployments", ("create", "patch", "list", "watch", "delete")),
    ("batch", "jobs", ("create", "patch", "list", "watch", "delete")),
    # the controller's watch caches and the live app logs
    ("apps", "replicasets", ("list", "watch")),
    ("", "pods", ("list", "watch")),
    ("", "pods/log", ("get",)),
    # leader election
    ("coordination.k8s.io", "leases", ("get", "create", "update")),
]


class ClusterError(Exception):
    """A cluster call failed; ``permanent`` says whether repeating it cannot help."""

    def __init__(self, message: str, *, permanent: bool, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent
        self.status = status
        self.reason = reason


class WatchExpired(ClusterError):
    """The resource version a watch resumed from is gone (410): list again."""

    def __init__(self, message: str = "watch expired (410 Gone): relist") -> None:
        super().__init__(message, permanent=False, status=410, reason="Expired")


# Statuses after which the same request will fail the same way.
_PERMANENT = {400, 401, 403, 404, 405, 409, 410, 415, 422}


def _error_from_response(status: int, body: bytes, what: str) -> ClusterError:
    message, reason = "", ""
    try:
        parsed = json.loads(body)
        message, reason = parsed.get("message", ""), parsed.get("reason", "")
    except (ValueError, AttributeError):
        message = body[:200].decode(errors="replace") if body else ""
    if status == 410:
        return WatchExpired(f"{what}: {message or 'resource version too old'}")
    text = f"{what}: the API server answered {status} {reason}".rstrip() + (f": {message}" if message else "")
    return ClusterError(text, permanent=status in _PERMANENT, status=status, reason=reason)


def load_api_client(*, kubeconfig: str = "", context: str = "") -> client.ApiClient:
    """Return an API client from a kubeconfig file, or from in-cluster config when none is given."""
    try:
        if kubeconfig:
            configuration = client.Configuration()
            config.load_kube_config(config_file=kubeconfig, context=context or None, client_configuration=configuration)
        else:
            configuration = client.Configuration()
            config.load_incluster_config(client_configuration=configuration)
    except (config.ConfigException, OSError) as e:
        where = f"kubeconfig {kubeconfig}" if kubeconfig else "in-cluster config"
        raise ClusterError(f"cannot load the {where}: {e}", permanent=True) from e
    return client.ApiClient(configuration)


class Cluster:
    """A Kubernetes cluster, reached through one API client."""

    def __init__(self, api_client: client.ApiClient, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.api = api_client
        self.timeout = timeout

    # -- low level ---------------------------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = None,
        stream: bool = False,
        what: str = "",
    ) -> Any:
        what = what or f"{method} {path}"
        headers = {"Accept": "application/json", "Content-Type": content_type}
        try:
            _, url, headers, body, _ = self.api.param_serialize(
                method, path, query_params=query or [], header_params=headers, body=body, auth_settings=["BearerToken"]
            )
            response = self.api.rest_client.request(
                method, url, headers=headers, body=body, _request_timeout=timeout or self.timeout
            )
        except ApiException as e:
            raise _error_from_response(
                e.status or 0, (e.body or "").encode() if isinstance(e.body, str) else (e.body or b""), what
            ) from e
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise ClusterError(f"{what}: the cluster is unreachable ({e.__class__.__name__}: {e})", permanent=False) from e
        if stream:
            if response.status >= 400:
                raise _error_from_response(response.status, response.response.data, what)
            return response.response
        data = response.read()
        if response.status >= 400:
            raise _error_from_response(response.status, data, what)
        return json.loads(data) if data else {}

    # -- objects -----------------------------------------------------------------------------

    def apply(self, obj: Obj, *, force: bool = True) -> Obj:
        """Create or update ``obj`` by server-side apply as the one Slipway field manager."""
        kind = KINDS[obj["kind"]]
        meta = obj["metadata"]
        return self._request(  # type: ignore[no-any-return]
            "PATCH",
            kind.path(meta.get("namespace"), meta["name"]),
            query=[("fieldManager", FIELD_MANAGER), ("force", "true" if force else "false")],
            body=obj,
            content_type="application/apply-patch+yaml",
            what=f"apply {obj['kind']} {meta.get('namespace', '')}/{meta['name']}".replace(" /", " "),
        )

    def apply_all(self, objects: builtins.list[Obj]) -> builtins.list[Obj]:
        """Apply objects in order (namespaces first, as rendered)."""
        return [self.apply(obj) for obj in objects]

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        """Return the object, or None when it does not exist."""
        try:
            return self._request("GET", KINDS[kind].path(namespace, name), what=f"read {kind} {name}")  # type: ignore[no-any-return]
        except ClusterError as e:
            if e.status == 404:
                return None
            raise

    def list(self, kind: str, namespace: str | None = None, *, selector: str = "") -> Obj:
        """Return the list (``items`` and ``metadata.resourceVersion``)."""
        query = [("labelSelector", selector)] if selector else []
        return self._request("GET", KINDS[kind].path(namespace), query=query, what=f"list {kind}")  # type: ignore[no-any-return]

    def create(self, obj: Obj) -> Obj:
        kind = KINDS[obj["kind"]]
        return self._request("POST", kind.path(obj["metadata"].get("namespace")), body=obj, what=f"create {obj['kind']}")  # type: ignore[no-any-return]

    def replace(self, obj: Obj) -> Obj:
        """Write ``obj`` whole; a stale ``metadata.resourceVersion`` makes it fail with 409 (compare-and-set)."""
        kind = KINDS[obj["kind"]]
        meta = obj["metadata"]
        return self._request(
            "PUT", kind.path(meta.get("namespace"), meta["name"]), body=obj, what=f"update {obj['kind']} {meta['name']}"
        )  # type: ignore[no-any-return]

    def delete(self, kind: str, name: str, namespace: str | None = None, *, grace_seconds: int | None = None) -> bool:
        """Delete an object and its dependents in the background; return False if it was already gone."""
        body: Obj = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        try:
            self._request("DELETE", KINDS[kind].path(namespace, name), body=body, what=f"delete {kind} {name}")
        except ClusterError as e:
            if e.status == 404:
                return False
            raise
        return True

    def delete_one_by_one(self, kind: str, namespace: str, *, selector: str, keep: set[str] | None = None) -> builtins.list[str]:
        """Delete each matching object whose name is not in ``keep``; return the names deleted (pruning)."""
        deleted = []
        for item in self.list(kind, namespace, selector=selector).get("items", []):
            name = item["metadata"]["name"]
            if keep and name in keep:
                continue
            if self.delete(kind, name, namespace):
                deleted.append(name)
        return deleted

    # -- watching ----------------------------------------------------------------------------

    def watch(
        self,
        kind: str,
        namespace: str | None = None,
        *,
        selector: str = "",
        resource_version: str = "",
        seconds: int = WATCH_SECONDS,
        opened: Callable[[Any], None] | None = None,
    ) -> Iterator[Obj]:
        """Yield watch events ({type, object}) from ``resource_version`` on, bookmarks included.

        Ends when the server closes the watch; raises WatchExpired when the version is too old.
        """
        query: list[tuple[str, Any]] = [("watch", "true"), ("allowWatchBookmarks", "true"), ("timeoutSeconds", seconds)]
        if selector:
            query.append(("labelSelector", selector))
        if resource_version:
            query.append(("resourceVersion", resource_version))
        response = self._request(
            "GET",
            KINDS[kind].path(namespace),
            query=query,
            timeout=(self.timeout, seconds + 30),
            stream=True,
            what=f"watch {kind}",
        )
        if opened is not None:
            opened(response)
        try:
            for line in _lines(response):
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object", {})
                    raise _error_from_response(status.get("code", 500), json.dumps(status).encode(), f"watch {kind}")
                yield event
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise ClusterError(f"watch {kind}: connection lost ({e.__class__.__name__})", permanent=False) from e
        finally:
            response.release_conn()

    # -- logs --------------------------------------------------------------------------------

    def pod_log(
        self,
        namespace: str,
        pod: str,
        container: str,
        *,
        follow: bool = False,
        tail_lines: int | None = None,
        timestamps: bool = False,
        previous: bool = False,
        since_seconds: int | None = None,
        since_time: str | None = None,
        timeout: float | None = None,
        opened: Callable[[Any], None] | None = None,
    ) -> Iterator[str]:
        """Yield the container's log lines (without newlines), following new ones when ``follow``.

        ``opened`` receives the HTTP response, so another thread can close a stream that
        waits for a line that may never come.
        """
        query: list[tuple[str, Any]] = [("container", container)]
        if follow:
            query.append(("follow", "true"))
        if tail_lines is not None:
            query.append(("tailLines", tail_lines))
        if timestamps:
            query.append(("timestamps", "true"))
        if previous:
            query.append(("previous", "true"))
        if since_seconds is not None:
            query.append(("sinceSeconds", since_seconds))
        if since_time:
            query.append(("sinceTime", since_time))
        read_timeout = timeout if timeout is not None else (3600.0 if follow else self.timeout)
        response = self._request(
            "GET",
            KINDS["Pod"].path(namespace, pod) + "/log",
            query=query,
            timeout=(self.timeout, read_timeout),
            stream=True,
            what=f"logs of {namespace}/{pod}/{container}",
        )
        if opened is not None:
            opened(response)
        try:
            for raw in _lines(response):
                yield raw.decode("utf-8", errors="replace")
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise ClusterError(f"logs of {pod}/{container}: stream ended ({e.__class__.__name__})", permanent=False) from e
        finally:
            response.release_conn()

    # -- leader election ---------------------------------------------------------------------

    def lease_acquire(self, *, namespace: str, name: str, identity: str, duration: int, now: str, expired: bool) -> bool:
        """Take or renew the Lease for ``identity``; return whether it is held.

        ``expired`` is the caller's judgement (from the lease read back) that the current
        holder stopped renewing; the update is a compare-and-set on resourceVersion, so two
        candidates never both win.
        """
        lease = self.get("Lease", name, namespace)
        spec = {"holderIdentity": identity, "leaseDurationSeconds": duration, "renewTime": now}
        if lease is None:
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name, "namespace": namespace},
                    "spec": {**spec, "acquireTime": now}}  # fmt: skip
            try:
                self.create(body)
            except ClusterError as e:
                if e.status == 409:
                    return False
                raise
            return True
        holder = (lease.get("spec") or {}).get("holderIdentity")
        if holder not in (identity, None, "") and not expired:
            return False
        if holder != identity:
            spec["acquireTime"] = now
        lease["spec"] = {**(lease.get("spec") or {}), **spec}
        try:
            self.replace(lease)
        except ClusterError as e:
            if e.status == 409:
                return False  # someone else renewed or took it first
            raise
        return True


def stream_app_logs(
    cluster: Cluster, namespace: str, label_selector: str, *, tail_lines: int = 100, stop: threading.Event | None = None
) -> Iterator[tuple[str, str, str]]:
    """Yield (pod, container, line) from every running pod matching the selector, following new pods as they start.

    Pods are watched (a redeploy's new pods join the stream) and each running container
    is followed by a thread of its own; closing the generator stops them all.
    """
    stop = stop or threading.Event()
    lines: queue.Queue[tuple[str, str, str]] = queue.Queue(maxsize=10000)
    following: set[tuple[str, str]] = set()
    responses: list[Any] = []
    lock = threading.Lock()

    def opened(response: Any) -> None:
        with lock:
            responses.append(response)
        if stop.is_set():
            _close(response)

    def follow(pod: str, container: str) -> None:
        try:
            for line in cluster.pod_log(namespace, pod, container, follow=True, tail_lines=tail_lines, opened=opened):
                while not stop.is_set():
                    try:
                        lines.put((pod, container, line), timeout=1)
                        break
                    except queue.Full:
                        continue  # the reader is slow; it may also be gone, which ``stop`` says
                if stop.is_set():
                    return
        except ClusterError as e:
            log.info("logs of %s/%s ended: %s", pod, container, e.message)
        except Exception:
            log.exception("following logs of %s/%s failed", pod, container)
        finally:
            with lock:
                following.discard((pod, container))

    def consider(pod: Obj) -> None:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        if meta.get("deletionTimestamp") or status.get("phase") != "Running":
            return
        for cs in status.get("containerStatuses") or []:
            key = (meta["name"], cs["name"])
            if (cs.get("state") or {}).get("running"):
                with lock:
                    if key in following:
                        continue
                    following.add(key)
                threading.Thread(target=follow, args=key, daemon=True, name=f"applog-{key[0]}").start()

    def watch_pods() -> None:
        version = ""
        while not stop.is_set():
            try:
                if not version:
                    listing = cluster.list("Pod", namespace, selector=label_selector)
                    version = listing["metadata"]["resourceVersion"]
                    for pod in listing.get("items", []):
                        consider(pod)
                for event in cluster.watch(
                    "Pod", namespace, selector=label_selector, resource_version=version, seconds=60, opened=opened
                ):
                    version = (event.get("object") or {}).get("metadata", {}).get("resourceVersion", version)
                    if event["type"] in ("ADDED", "MODIFIED"):
                        consider(event["object"])
                    if stop.is_set():
                        return
            except WatchExpired:
                version = ""
            except ClusterError as e:
                log.info("watching pods for logs: %s", e.message)
                stop.wait(1)
            except Exception:
                log.exception("watching pods for logs failed")
                stop.wait(1)

    threading.Thread(target=watch_pods, daemon=True, name="applog-watch").start()
    try:
        while not stop.is_set():
            try:
                yield lines.get(timeout=1)
            except queue.Empty:
                continue
    finally:
        stop.set()
        with lock:
            for response in responses:
                _close(response)


def _close(response: Any) -> None:
    """Close a streamed response, waking the thread blocked reading it."""
    try:
        shutdown = getattr(response, "shutdown", None)
        if shutdown is not None:
            shutdown()
        response.close()
    except Exception as e:  # it may be closed already
        log.debug("closing a log stream: %s", e)


def _lines(response: Any) -> Iterator[bytes]:
    """Yield complete lines from a streamed HTTP response."""
    pending = b""
    for chunk in response.stream(amt=None, decode_content=False):
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            if line:
                yield line
    if pending:
        yield pending
