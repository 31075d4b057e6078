"""Where live app logs come from: the cluster module, or a source tests inject.

A source is ``source(namespace, label_selector, tail_lines)`` returning an iterator of
``(pod, container, line)`` that follows the app's running pods; it blocks (the cluster
client does), so the stream runs it on a thread of its own. Nothing is stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from apps.deployments.models import App

LogSource = Callable[[str, str, int], Iterator[tuple[str, str, str]]]


class LogsUnavailable(Exception):
    """This installation cannot follow pod output."""


def pod_selector(app: App) -> str:
    """Return the label selector of the app's running pods (not its build pods)."""
    from builder import specs

    return specs.selector(app=app.name, component=specs.COMPONENT_APP)


def from_cluster(namespace: str, label_selector: str, tail_lines: int) -> Iterator[tuple[str, str, str]]:
    """Follow the app's running pods through the cluster module."""
    from apps.deployments.pipeline import cluster
    from builder import kube

    return kube.stream_app_logs(cluster(), namespace, label_selector, tail_lines=tail_lines)


# The source the API follows; tests swap it for one that yields known lines.
source: LogSource = from_cluster
