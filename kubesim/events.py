"""Kubelet events (Pulled, Started, BackOff, Failed, ...), written in the background."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
import uuid
from collections import OrderedDict
from typing import Any

from kubesim.kubeapi import Kube, KubeError

log = logging.getLogger("kubesim.kubelet")

MAX_REMEMBERED = 5000


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class EventRecorder:
    """Queue events and write them from one thread; repeats bump `count` as the kubelet does."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.queue: queue.Queue[tuple[dict[str, Any], str, str, str, bool] | None] = queue.Queue(maxsize=10000)
        # Key -> (namespace, event name, count): a crash loop is one event with a growing count.
        self.seen: OrderedDict[tuple[str, ...], tuple[str, str, int]] = OrderedDict()
        self.thread = threading.Thread(target=self._loop, name="events", daemon=True)
        self.thread.start()

    def record(self, pod: dict[str, Any], reason: str, message: str, *, field_path: str = "", warning: bool = False) -> None:
        """Queue one event; drop it when the queue is full rather than slow a pod down."""
        with contextlib.suppress(queue.Full):
            self.queue.put_nowait((pod, reason, message, field_path, warning))

    def stop(self) -> None:
        self.queue.put(None)

    def _loop(self) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                return
            try:
                self._write(*item)
            except KubeError as exc:
                # A namespace being deleted refuses new events; nothing to do about it.
                log.debug("event not written: %s", exc)

    def _write(self, pod: dict[str, Any], reason: str, message: str, field_path: str, warning: bool) -> None:
        meta = pod["metadata"]
        ns = meta["namespace"]
        key = (ns, meta["uid"], field_path, reason, message)
        known = self.seen.get(key)
        if known:
            _, name, count = known
            try:
                self.kube.request(
                    "PATCH",
                    f"/api/v1/namespaces/{ns}/events/{name}",
                    body={"count": count + 1, "lastTimestamp": _now()},
                    content_type="application/merge-patch+json",
                )
                self.seen[key] = (ns, name, count + 1)
                self.seen.move_to_end(key)
                return
            except KubeError as exc:
                if exc.status != 404:
                    raise
        name = f"{meta['name']}.{uuid.uuid4().hex[:16]}"
        involved = {"kind": "Pod", "namespace": ns, "name": meta["name"], "uid": meta["uid"], "apiVersion": "v1"}
        if field_path:
            involved["fieldPath"] = field_path
        node = pod.get("spec", {}).get("nodeName", "")
        self.kube.request(
            "POST",
            f"/api/v1/namespaces/{ns}/events",
            body={
                "metadata": {"name": name, "namespace": ns},
                "involvedObject": involved,
                "reason": reason,
                "message": message,
                "source": {"component": "kubelet", "host": node},
                "firstTimestamp": _now(),
                "lastTimestamp": _now(),
                "count": 1,
                "type": "Warning" if warning else "Normal",
                "reportingComponent": "",
                "reportingInstance": "",
            },
        )
        self.seen[key] = (ns, name, 1)
        if len(self.seen) > MAX_REMEMBERED:
            self.seen.popitem(last=False)
