"""``slipway``: log in, list apps, read status, deploy and wait, read logs.

Exit codes (docs/cli.md):

    0  success; with --wait, the deployment is live
    1  the deployment failed (its error is printed)
    2  usage error, or not logged in
    3  the deployment was stopped (cancelled, superseded or the app stopped)
    4  --wait ran out of time (--timeout)
    5  authentication or permission refused (bad or revoked token, throttled)
    6  the server refused the request (no such app, action not available, bad value) or could not be reached
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO
from urllib.parse import quote

from cli import config as cfg
from cli.api import ApiError, Client, Event

OK, FAILED, USAGE, STOPPED, TIMEOUT, AUTH, REFUSED = 0, 1, 2, 3, 4, 5, 6
SETTLED = {"live", "failed", "stopped"}


class Exit(Exception):
    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message)
        self.code, self.message = code, message


def exit_code_for(error: ApiError) -> int:
    return AUTH if error.status in (401, 403, 429) else REFUSED


def app_path(app: str, *rest: str) -> str:
    return "/api/v1/apps/" + "/".join([quote(app, safe=""), *rest])


# -- commands --------------------------------------------------------------------------------


def cmd_login(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    url = cfg.normalise_url(args.url)
    token = args.token or os.environ.get("SLIPWAY_TOKEN", "")
    if not token:
        if sys.stdin.isatty():
            token = getpass.getpass("API token (create one under Settings → API tokens): ")
        else:
            token = sys.stdin.readline()
    token = token.strip()
    if not token:
        raise Exit(USAGE, "No token given: pass --token, set SLIPWAY_TOKEN or type it when asked.")
    client = Client(url, token)
    apps = client.get("/api/v1/apps", fields="name")
    path = cfg.save(cfg.Config(url=url, token=token))
    out.write(f"Logged in to {url}; {len(apps)} app{'s' if len(apps) != 1 else ''} visible. Saved to {path}.\n")
    return OK


def _health(app: dict[str, Any]) -> str:
    health = app.get("health") or {}
    state = health.get("state", "none")
    if state == "none":
        return "-"
    return state + (f" ({health['reason']})" if health.get("reason") else "")


def cmd_apps(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    apps = client_from_config().get("/api/v1/apps", fields="name,team,source,status,current_deployment,health")
    if args.json:
        out.write(json.dumps(apps, indent=2) + "\n")
        return OK
    rows = [("NAME", "TEAM", "SOURCE", "STATUS", "DEPLOYMENT", "HEALTH")]
    for app in apps:
        number = f"#{app['current_deployment']}" if app["current_deployment"] else "-"
        rows.append((app["name"], app["team"], app["source"], app["status"] or "-", number, _health(app)))
    out.write(table(rows))
    return OK


def table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "".join("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n" for row in rows)


def cmd_status(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    params = {"fields": args.fields} if args.fields else {}
    app = client_from_config().get(app_path(args.app), **params)
    if args.json or args.fields:
        if args.json:
            out.write(json.dumps(app, indent=2) + "\n")
        else:
            for key, value in app.items():
                shown = value if isinstance(value, str) else json.dumps(value)
                out.write(f"{key}: {shown}\n")
        return OK
    number = f"#{app['current_deployment']}" if app["current_deployment"] else "none yet"
    lines = [
        f"app:         {app['name']} ({app['source']}, team {app['team']})",
        f"url:         {app['url']}",
        f"deployment:  {number}" + (f" {app['status']}" if app["status"] else ""),
        f"health:      {_health(app)}",
        f"actions:     {', '.join(app['actions']) or '-'}",
    ]
    if app["error"]:
        lines.append(f"error:       {app['error']}")
    out.write("\n".join(lines) + "\n")
    return OK


def cmd_deploy(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    client = client_from_config()
    app = client.get(app_path(args.app), fields="source,current_deployment")
    if args.image_tag:
        if app["source"] != "image":
            raise Exit(USAGE, f"{args.app} builds from git: --image-tag is for image apps.")
        client.patch(app_path(args.app), {"image_tag": args.image_tag})
    action = (
        "redeploy" if args.redeploy else "rebuild" if args.rebuild else "deploy-new" if app["source"] == "image" else "rebuild"
    )

    # A redeploy appends to the current deployment's log: show only what it adds.
    log_after = 0
    if action == "redeploy" and app["current_deployment"]:
        log_after = client.get(app_path(args.app, "deployments", str(app["current_deployment"])), fields="log_seq")["log_seq"]

    if not args.wait:
        deployment = client.post(app_path(args.app, action))
        out.write(f"Deployment #{deployment['number']} of {args.app} ({action}): {deployment['status']}.\n")
        return OK

    deadline = time.monotonic() + args.timeout
    watcher = EventWatcher(client, args.app, deadline)
    watcher.start()
    # Watch first, then act: every change after the action is on the stream.
    if not watcher.ready.wait(max(0.0, deadline - time.monotonic())):
        watcher.raise_error()
        raise Exit(TIMEOUT, f"Timed out after {args.timeout:g} s connecting to the event stream.")
    deployment = client.post(app_path(args.app, action))
    number = deployment["number"]
    out.write(f"Deployment #{number} of {args.app} ({action}): {deployment['status']}. Waiting until it settles…\n")
    out.flush()
    log = LogFollower(client, args.app, number, log_after, deadline, out)
    log.start()
    final = watcher.wait_for_settled(number, current=deployment)
    log.join(timeout=min(10.0, max(0.0, deadline - time.monotonic()) + 2))
    return report(final, out, err)


def report(deployment: dict[str, Any], out: TextIO, err: TextIO) -> int:
    number, status = deployment["number"], deployment["status"]
    if status == "live":
        out.write(f"Deployment #{number} is live.\n")
        return OK
    if status == "failed":
        err.write(f"Deployment #{number} failed: {deployment.get('error') or 'see the deploy log'}\n")
        return FAILED
    err.write(f"Deployment #{number} was stopped: {deployment.get('stopped_reason') or 'stopped'}\n")
    return STOPPED


class EventWatcher(threading.Thread):
    """Follows the app's event stream into a queue; ``ready`` is set once the stream has a position."""

    def __init__(self, client: Client, app: str, deadline: float) -> None:
        super().__init__(daemon=True)
        self.client, self.app, self.deadline = client, app, deadline
        self.ready = threading.Event()
        self.events: queue.Queue[Event | BaseException | None] = queue.Queue()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for event in self.client.stream(
                "/api/v1/events", params={"app": self.app}, deadline=self.deadline, on_id=self._position
            ):
                self.events.put(event)
            self.events.put(None)
        except BaseException as e:  # handed to the main thread
            self.error = e
            self.ready.set()
            self.events.put(e)

    def _position(self, event_id: str) -> None:
        self.ready.set()

    def raise_error(self) -> None:
        if self.error is not None:
            raise self.error

    def wait_for_settled(self, number: int, *, current: dict[str, Any]) -> dict[str, Any]:
        """Return the deployment once it is live, failed or stopped, from the events (re-reading after a resync)."""
        deployment_path = app_path(self.app, "deployments", str(number))
        while True:
            remaining = self.deadline - time.monotonic()
            timed_out = Exit(TIMEOUT, f"Timed out waiting for deployment #{number}; it is still {current['status']}.")
            if remaining <= 0:
                raise timed_out
            try:
                item = self.events.get(timeout=remaining)
            except queue.Empty:
                continue
            if isinstance(item, TimeoutError):
                raise timed_out
            if isinstance(item, BaseException):
                raise item
            if item is None:
                raise Exit(REFUSED, "The event stream ended before the deployment settled.")
            if item.event == "resync":
                # Some events are gone: read the state itself.
                current = self.client.get(deployment_path)
                if current["status"] in SETTLED:
                    return current
                continue
            if item.event != "status":
                continue
            data = item.json()
            if data.get("deployment") != number:
                continue
            current = {**current, "status": data["to"]}
            if data["to"] in SETTLED:
                return self.client.get(deployment_path)


class LogFollower(threading.Thread):
    """Prints the deployment's log as it arrives, until the deployment settles."""

    def __init__(self, client: Client, app: str, number: int, after: int, deadline: float, out: TextIO) -> None:
        super().__init__(daemon=True)
        self.client, self.app, self.number, self.after, self.deadline, self.out = client, app, number, after, deadline, out

    def run(self) -> None:
        path = app_path(self.app, "deployments", str(self.number), "logs")
        try:
            for event in self.client.stream(path, params={"follow": "1", "after": self.after}, deadline=self.deadline):
                if event.event == "log":
                    line = event.json()
                    self.out.write(f"[{line['step']}] {line['text']}\n")
                    self.out.flush()
                elif event.event == "end":
                    return
        except (ApiError, TimeoutError):
            return  # the outcome comes from the event stream; the log is a courtesy


def cmd_logs(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    client = client_from_config()
    if args.app_output:
        return follow_app_output(client, args.app, args.tail, out)
    number = args.deployment
    if number is None:
        number = client.get(app_path(args.app), fields="current_deployment")["current_deployment"]
        if number is None:
            raise Exit(REFUSED, f"{args.app} has no deployments yet.")
    path = app_path(args.app, "deployments", str(number), "logs")
    if not args.follow:
        out.write(client.text(path))
        return OK
    for event in client.stream(path, params={"follow": "1"}):
        if event.event == "log":
            line = event.json()
            out.write(f"{line['time']} [{line['step']}] {line['text']}\n")
            out.flush()
        elif event.event == "end":
            return report(event.json(), out, err)
    return OK


def follow_app_output(client: Client, app: str, tail: int, out: TextIO) -> int:
    for event in client.stream(app_path(app, "logs"), params={"tail": tail}, reconnect=False):
        data = event.json()
        if event.event == "log":
            out.write(f"{data['pod']} {data['container']}: {data['line']}\n")
            out.flush()
        elif event.event == "end":
            out.write(data.get("message", "") + "\n")
            return OK
    return OK


# -- plumbing --------------------------------------------------------------------------------


def client_from_config() -> Client:
    try:
        config = cfg.load()
    except cfg.ConfigError as e:
        raise Exit(USAGE, str(e)) from e
    return Client(config.url, config.token)


def positive_seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError("the timeout must be more than 0 seconds")
    return seconds


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="slipway",
        description="Deploy to Slipway from the command line.",
        epilog="Exit codes: 0 ok/live, 1 failed, 2 usage, 3 stopped, 4 timeout, 5 auth, 6 refused or unreachable.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    login = sub.add_parser("login", help="store the server URL and an API token")
    login.add_argument("url", help="the Slipway server, e.g. https://slipway.example.com")
    login.add_argument("--token", help="the API token (default: SLIPWAY_TOKEN, or asked for)")
    login.set_defaults(run=cmd_login)

    apps = sub.add_parser("apps", help="list the apps you can see")
    apps.add_argument("--json", action="store_true", help="print JSON")
    apps.set_defaults(run=cmd_apps)

    status = sub.add_parser("status", help="show an app's status, health and offered actions")
    status.add_argument("app")
    status.add_argument("--fields", help="only these fields, comma-separated, e.g. status,health,error")
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(run=cmd_status)

    deploy = sub.add_parser("deploy", help="start a deployment and optionally wait until it is live")
    deploy.add_argument("app")
    how = deploy.add_mutually_exclusive_group()
    how.add_argument(
        "--rebuild", action="store_true", help="build the latest commit of the branch (git apps; the default for them)"
    )
    how.add_argument("--redeploy", action="store_true", help="re-apply the current deployment with settings read fresh")
    how.add_argument("--image-tag", metavar="TAG", help="set the image tag, then deploy it (image apps)")
    deploy.add_argument("--wait", action="store_true", help="follow the deployment and exit with its outcome")
    deploy.add_argument(
        "--timeout", type=positive_seconds, default=900.0, metavar="S", help="give up waiting after S seconds (default 900)"
    )
    deploy.set_defaults(run=cmd_deploy)

    logs = sub.add_parser("logs", help="print a deployment's log, or follow the app's output")
    logs.add_argument("app")
    logs.add_argument("--deployment", type=int, metavar="N", help="deployment number (default: the current one)")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new lines until the deployment settles")
    logs.add_argument("--app-output", action="store_true", help="follow the running app's stdout and stderr instead")
    logs.add_argument(
        "--tail", type=int, default=100, metavar="N", help="with --app-output: lines of history first (default 100)"
    )
    logs.set_defaults(run=cmd_logs)
    return p


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    args = parser().parse_args(argv)
    run: Callable[[argparse.Namespace, TextIO, TextIO], int] = args.run
    try:
        return run(args, out, err)
    except Exit as e:
        if e.message:
            err.write(f"slipway: {e.message}\n")
        return e.code
    except cfg.ConfigError as e:
        err.write(f"slipway: {e}\n")
        return USAGE
    except ApiError as e:
        err.write(f"slipway: {e}\n")
        return exit_code_for(e)
    except TimeoutError:
        err.write("slipway: timed out\n")
        return TIMEOUT
    except KeyboardInterrupt:
        err.write("slipway: interrupted\n")
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
