"""Run the controller: watch the cluster and record build outcomes, rollout outcomes and runtime health."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from apps.deployments import controller, pipeline

log = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Watch Slipway's Jobs, Pods, ReplicaSets and Deployments and record what they mean."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--no-leader-election", action="store_true", help="Act without holding the Lease (one controller only)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        kube = pipeline.cluster()
        ctl = controller.Controller(kube)
        signal.signal(signal.SIGTERM, lambda *_: ctl.stop.set())
        signal.signal(signal.SIGINT, lambda *_: ctl.stop.set())
        leader = None
        if settings.LEADER_ELECTION and not options["no_leader_election"]:
            elected = threading.Event()

            def lost() -> None:
                log.error("lost the controller lease; stopping so another controller can lead")
                ctl.stop.set()

            leader = threading.Thread(
                target=controller.lead,
                kwargs={"kube": kube, "identity": ctl.identity, "stop": ctl.stop, "elected": elected, "on_lost": lost},
                daemon=True,
                name="lease",
            )
            leader.start()
            self.stdout.write(f"controller {ctl.identity}: waiting to lead")
            while not elected.wait(0.5):
                if ctl.stop.is_set():
                    return
        self.stdout.write(f"controller {ctl.identity}: leading")
        ctl.run()
        if leader is not None:
            leader.join(timeout=10)  # let it give the Lease up
        self.stdout.write("controller stopped")
