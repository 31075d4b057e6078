"""Health endpoints for probes: alive, and ready to serve."""

from __future__ import annotations

from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Say the process is alive; checks nothing else, so a slow database never restarts the web."""
    return JsonResponse({"status": "ok"})


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """Say whether this process can serve: database reachable, migrations applied, broker reachable."""
    checks: dict[str, str] = {}
    try:
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
        checks["database"] = "ok"
        checks["migrations"] = "ok" if not pending else f"{len(pending)} not applied"
    except Exception as e:
        checks["database"] = f"unreachable: {e.__class__.__name__}"
    checks["broker"] = _broker_check()
    ok = all(v == "ok" for v in checks.values())
    return JsonResponse({"status": "ok" if ok else "unavailable", "checks": checks}, status=200 if ok else 503)


def _broker_check() -> str:
    from config.celery_app import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return "ok"
    except Exception as e:
        return f"unreachable: {e.__class__.__name__}"
