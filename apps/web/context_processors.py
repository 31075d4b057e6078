"""Template context every page needs."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def slipway(request: HttpRequest) -> dict[str, object]:
    return {"kube_simulated": settings.KUBE_SIMULATED, "base_domain": settings.BASE_DOMAIN}
