"""The simulated kubelet: registers nodes, runs the pods bound to them, serves their logs.

Run as its own process by `python -m kubesim up` (or Cluster.start()):
    python -m kubesim.kubelet --kubeconfig K --state-dir D --port P --cert C --key K
"""

from __future__ import annotations

import argparse
import calendar
import json
import logging
import signal
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from kubesim import behaviours as bh
from kubesim.events import EventRecorder
from kubesim.kubeapi import Kube, KubeError
from kubesim.runtime import PodWorker, iso, iso_nano

log = logging.getLogger("kubesim.kubelet")

KUBELET_VERSION = "v1.20.2"
LEASE_SECONDS = 40
HEARTBEAT_EVERY = 10.0
STATUS_EVERY = 60.0
HELP = (
    "Behaviour rules for kubesim's simulated containers: one key per rule, each value JSON "
    '{"match": {...}, "behaviour": {"type": ...}}. See docs/local-cluster.md in Slipway.'
)


class Kubelet:
    """Everything one simulated kubelet process does, for one or more nodes."""

    def __init__(
        self, kube: Kube, nodes: list[str], port: int, state_dir: Path, cert: str | None = None, key: str | None = None
    ) -> None:
        self.kube = kube
        self.nodes = nodes
        self.port = port
        self.cert, self.key = cert, key
        self.pods_dir = state_dir / "pods"
        self.pods_dir.mkdir(parents=True, exist_ok=True)
        self.workers: dict[str, PodWorker] = {}
        self.by_name: dict[tuple[str, str], PodWorker] = {}
        self.lock = threading.Lock()
        self._rules: list[bh.Rule] = []
        self._rule_errors: dict[str, str] = {}
        self.rules_rv = "0"
        self._ip_next = 0
        self.stopping = threading.Event()
        self.server: ThreadingHTTPServer | None = None
        self.events = EventRecorder(kube)

    # ----- shared state ----------------------------------------------------------------------
    def rules(self) -> list[bh.Rule]:
        return self._rules

    def allocate_ip(self) -> str:
        with self.lock:
            n = self._ip_next
            self._ip_next += 1
        return f"10.244.{(n // 254) % 256}.{n % 254 + 1}"

    def worker(self, namespace: str, name: str) -> PodWorker | None:
        with self.lock:
            return self.by_name.get((namespace, name))

    # ----- nodes -----------------------------------------------------------------------------
    def _node_status(self) -> dict[str, Any]:
        now = iso(time.time())
        resources = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}

        def cond(ctype: str, status: str, reason: str, message: str) -> dict[str, str]:
            return {
                "type": ctype,
                "status": status,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": self._node_since,
            }

        return {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}},
            "nodeInfo": {
                "machineID": "kubesim",
                "systemUUID": "kubesim",
                "bootID": "kubesim",
                "kernelVersion": "kubesim",
                "osImage": "kubesim simulated node",
                "containerRuntimeVersion": "kubesim://1.0",
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION,
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        }

    def register_nodes(self) -> None:
        """Create the Node objects, mark them Ready and lift the not-ready taint."""
        self._node_since = iso(time.time())
        for name in self.nodes:
            body = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {
                        "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                        "kubesim.slipway.dev/simulated": "true",
                    },
                },
            }
            try:
                self.kube.request("POST", "/api/v1/nodes", body=body)
            except KubeError as exc:
                if exc.status != 409:
                    raise
            self.kube.request(
                "PATCH",
                f"/api/v1/nodes/{name}/status",
                body={"status": self._node_status()},
                content_type="application/merge-patch+json",
            )
            # The TaintNodesByCondition admission plugin adds node.kubernetes.io/not-ready on
            # create, and the node lifecycle controller that would lift it is off.
            self.kube.request(
                "PATCH", f"/api/v1/nodes/{name}", body={"spec": {"taints": None}}, content_type="application/merge-patch+json"
            )
            self._renew_lease(name)

    def _renew_lease(self, name: str) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
        spec = {"holderIdentity": name, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": now}
        try:
            self.kube.request("PATCH", f"{path}/{name}", body={"spec": spec}, content_type="application/merge-patch+json")
        except KubeError as exc:
            if exc.status != 404:
                raise
            try:
                self.kube.request("POST", path, body={"metadata": {"name": name}, "spec": spec})
            except KubeError as exc2:
                if exc2.status != 409:
                    raise

    def _heartbeat_loop(self) -> None:
        last_status = time.monotonic()
        while not self.stopping.wait(HEARTBEAT_EVERY):
            for name in self.nodes:
                try:
                    try:
                        self.kube.get(f"/api/v1/nodes/{name}")
                    except KubeError as exc:
                        if exc.status != 404:
                            raise
                        # Someone deleted the Node: register again, as a real kubelet does.
                        log.info("node %s is gone; registering it again", name)
                        self.register_nodes()
                    self._renew_lease(name)
                    if time.monotonic() - last_status >= STATUS_EVERY:
                        self.kube.request(
                            "PATCH",
                            f"/api/v1/nodes/{name}/status",
                            body={"status": self._node_status()},
                            content_type="application/merge-patch+json",
                        )
                except KubeError as exc:
                    log.warning("heartbeat for %s failed: %s", name, exc)
            if time.monotonic() - last_status >= STATUS_EVERY:
                last_status = time.monotonic()

    # ----- behaviours ConfigMap --------------------------------------------------------------
    def ensure_behaviours_configmap(self) -> None:
        """Create namespace kubesim-system and an empty behaviours ConfigMap if missing."""
        try:
            self.kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": bh.NAMESPACE}})
        except KubeError as exc:
            if exc.status != 409:
                raise
        body = {"metadata": {"name": bh.CONFIGMAP, "annotations": {"kubesim.slipway.dev/help": HELP}}, "data": {}}
        try:
            self.kube.request("POST", f"/api/v1/namespaces/{bh.NAMESPACE}/configmaps", body=body)
        except KubeError as exc:
            if exc.status != 409:
                raise

    def _apply_configmap(self, cm: dict[str, Any] | None) -> None:
        rules, errors = bh.parse_rules((cm or {}).get("data"))
        self._rules = rules
        for name, err in errors.items():
            log.warning("behaviour rule %s ignored: %s", name, err)
        if cm is not None and errors != self._rule_errors:
            # Tell a person editing the ConfigMap with kubectl what was wrong, on the object.
            value = json.dumps(errors, sort_keys=True) if errors else None
            try:
                self.kube.request(
                    "PATCH",
                    f"/api/v1/namespaces/{bh.NAMESPACE}/configmaps/{bh.CONFIGMAP}",
                    body={"metadata": {"annotations": {"kubesim.slipway.dev/errors": value}}},
                    content_type="application/merge-patch+json",
                )
            except KubeError as exc:
                log.warning("could not record rule errors: %s", exc)
        self._rule_errors = errors
        if cm is not None:
            self.rules_rv = cm["metadata"]["resourceVersion"]
        with self.lock:
            workers = list(self.workers.values())
        for w in workers:
            w.rules_changed()

    def _behaviours_loop(self) -> None:
        path = f"/api/v1/namespaces/{bh.NAMESPACE}/configmaps"
        params = {"fieldSelector": f"metadata.name={bh.CONFIGMAP}"}
        self._list_watch(path, params, self._on_configmap_list, self._on_configmap_event)

    def _on_configmap_list(self, items: list[dict[str, Any]]) -> None:
        self._apply_configmap(items[0] if items else None)

    def _on_configmap_event(self, etype: str, obj: dict[str, Any]) -> None:
        self._apply_configmap(None if etype == "DELETED" else obj)

    # ----- pods ------------------------------------------------------------------------------
    def _list_watch(self, path: str, params: dict[str, Any], on_list: Any, on_event: Any) -> None:
        """List, then watch from the list's resourceVersion; relist on 410, retry on errors."""
        rv = None
        while not self.stopping.is_set():
            try:
                if rv is None:
                    listing = self.kube.get(path, params=params)
                    rv = listing["metadata"]["resourceVersion"]
                    on_list(listing.get("items") or [])
                for event in self.kube.watch(path, {**params, "resourceVersion": rv, "allowWatchBookmarks": "true"}):
                    if self.stopping.is_set():
                        return
                    etype, obj = event["type"], event["object"]
                    if etype == "ERROR":
                        if obj.get("code") == 410:
                            rv = None  # too old: relist
                        else:
                            log.warning("watch %s: %s", path, obj.get("message"))
                        break
                    rv = obj["metadata"]["resourceVersion"]
                    if etype != "BOOKMARK":
                        on_event(etype, obj)
            except KubeError as exc:
                if exc.status == 410:
                    rv = None
                elif not self.stopping.is_set():
                    log.info("watch %s interrupted: %s", path, exc)
                    self.stopping.wait(0.5)
            except Exception:  # Keep watching whatever a handler did; log it to fix it.
                log.exception("watch %s handler failed", path)
                self.stopping.wait(0.5)

    def _pods_loop(self, node: str) -> None:
        params = {"fieldSelector": f"spec.nodeName={node}"}
        self._list_watch("/api/v1/pods", params, lambda items: self._on_pod_list(node, items), self._on_pod_event)

    def _on_pod_list(self, node: str, items: list[dict[str, Any]]) -> None:
        seen = {p["metadata"]["uid"] for p in items}
        with self.lock:
            stale = [w for uid, w in self.workers.items() if uid not in seen and w.pod["spec"].get("nodeName") == node]
        for w in stale:
            self._forget(w)
        for pod in items:
            self._on_pod_event("ADDED", pod)

    def _forget(self, w: PodWorker) -> None:
        w.stop()
        with self.lock:
            self.workers.pop(w.uid, None)
            if self.by_name.get((w.namespace, w.name)) is w:
                self.by_name.pop((w.namespace, w.name), None)
        w.sandbox.cleanup()

    def _on_pod_event(self, etype: str, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        with self.lock:
            w = self.workers.get(uid)
        if etype == "DELETED":
            if w:
                self._forget(w)
            return
        if w:
            w.update(pod)
            return
        phase = pod.get("status", {}).get("phase")
        if phase in ("Succeeded", "Failed") and not meta.get("deletionTimestamp"):
            return  # finished before this kubelet started; nothing left to run
        ip = pod.get("status", {}).get("podIP") or self.allocate_ip()
        w = PodWorker(self, pod, ip)
        with self.lock:
            self.workers[uid] = w
            self.by_name[(meta["namespace"], meta["name"])] = w
        w.start()

    # ----- serving ---------------------------------------------------------------------------
    def serve(self) -> None:
        """Serve /containerLogs and /healthz over TLS on 127.0.0.1:port."""
        handler = type("Handler", (LogHandler,), {"kubelet": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        self.server.daemon_threads = True
        if self.cert and self.key:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(self.cert, self.key)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, name="logs", daemon=True).start()

    def run(self) -> None:
        """Start every loop and block until stop() is called; serve() and register first."""
        threads = [
            threading.Thread(target=self._behaviours_loop, name="behaviours", daemon=True),
            threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True),
        ]
        threads += [threading.Thread(target=self._pods_loop, args=(n,), name=f"pods-{n}", daemon=True) for n in self.nodes]
        for t in threads:
            t.start()
        while not self.stopping.wait(1.0):
            pass

    def stop(self) -> None:
        self.stopping.set()
        with self.lock:
            workers = list(self.workers.values())
        for w in workers:
            w.stop()
            w._release()
        if self.server:
            self.server.shutdown()


class LogHandler(BaseHTTPRequestHandler):
    """The kubelet's /containerLogs endpoint, reached through the apiserver's pods/log proxy."""

    kubelet: Kubelet
    server_version = "kubesim-kubelet"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("logs: " + format, *args)

    def _plain(self, code: int, text: str) -> None:
        body = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        url = urlparse(self.path)
        if url.path in ("/healthz", "/readyz", "/livez"):
            return self._plain(200, "ok")
        if url.path == "/kubesim/rules":
            # set_behaviour() reads this through the apiserver's node proxy to know that the
            # kubelet has seen its change before a test creates pods.
            k = self.kubelet
            return self._plain(
                200,
                json.dumps(
                    {
                        "resourceVersion": k.rules_rv,
                        "errors": k._rule_errors,
                        "rules": [{"name": r.name, "type": r.behaviour.type, "match": r.match} for r in k.rules()],
                    }
                ),
            )
        parts = [unquote(p) for p in url.path.strip("/").split("/")]
        if len(parts) != 4 or parts[0] != "containerLogs":
            return self._plain(404, "404 page not found")
        _, ns, pod, container = parts
        q = {k: v[-1] for k, v in parse_qs(url.query).items()}
        w = self.kubelet.worker(ns, pod)
        if w is None:
            return self._plain(404, f'pod "{pod}" not found')
        c = w.container(container)
        if c is None:
            return self._plain(400, f'container "{container}" in pod "{pod}" is not valid')
        truthy = ("true", "1")
        previous = q.get("previous", "false").lower() in truthy
        buf = c.previous if previous else c.current
        if buf is None:
            if previous:
                return self._plain(400, f'previous terminated container "{container}" in pod "{pod}" not found')
            return self._plain(400, f'container "{container}" in pod "{pod}" is waiting to start: {c.waiting_reason()}')
        follow = q.get("follow", "false").lower() in truthy and not previous
        timestamps = q.get("timestamps", "false").lower() in truthy
        since = None
        if "sinceSeconds" in q:
            since = time.time() - float(q["sinceSeconds"])
        elif "sinceTime" in q:
            since = calendar.timegm(time.strptime(q["sinceTime"][:19], "%Y-%m-%dT%H:%M:%S"))
        limit = int(q["limitBytes"]) if "limitBytes" in q else None
        lines, seq = buf.snapshot()
        if since is not None:
            lines = [ln for ln in lines if ln[0] >= since]
        if "tailLines" in q:
            n = int(q["tailLines"])
            lines = lines[-n:] if n > 0 else []
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        sent = 0

        def emit(entry: tuple[float, str, str]) -> bool:
            nonlocal sent
            ts, _, text = entry
            data = ((iso_nano(ts) + " ") if timestamps else "") + text + "\n"
            raw = data.encode()
            if limit is not None and sent + len(raw) > limit:
                raw = raw[: max(limit - sent, 0)]
            self.wfile.write(raw)
            self.wfile.flush()
            sent += len(raw)
            return limit is None or sent < limit

        try:
            for entry in lines:
                if not emit(entry):
                    return
            if follow:
                stop = self.kubelet.stopping.is_set
                for entry in buf.follow(seq, stop):
                    if since is not None and entry[0] < since:
                        continue
                    if not emit(entry):
                        return
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            return


def main(argv: list[str] | None = None) -> None:
    """Run the simulated kubelet until SIGTERM."""
    p = argparse.ArgumentParser(prog="python -m kubesim.kubelet")
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--state-dir", required=True)
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--cluster-name", default="default")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(levelname)s %(threadName)s %(message)s"
    )
    ca_file = Path(args.state_dir) / "pki" / "ca.crt"
    kube = Kube.from_kubeconfig(args.kubeconfig, ca_file=str(ca_file) if ca_file.is_file() else None)
    nodes = [f"kubesim-node-{i}" for i in range(1, args.nodes + 1)]
    kubelet = Kubelet(kube, nodes, args.port, Path(args.state_dir), args.cert, args.key)

    def on_term(signum: int, frame: Any) -> None:
        kubelet.stopping.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    log.info("kubesim kubelet for %s (time scale %s) on port %d", ", ".join(nodes), bh.time_scale(), args.port)
    kubelet.serve()
    # The apiserver may be up while its RBAC bootstrap is not: retry registering for a while.
    deadline = time.monotonic() + 60
    while True:
        try:
            kubelet.ensure_behaviours_configmap()
            kubelet.register_nodes()
            break
        except KubeError as exc:
            if time.monotonic() > deadline:
                raise
            log.info("waiting for the apiserver: %s", exc)
            time.sleep(0.5)
    try:
        kubelet.run()
    finally:
        kubelet.stop()


if __name__ == "__main__":
    main()
