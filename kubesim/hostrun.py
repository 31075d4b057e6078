"""Run a container's command on the host, with its volumes mapped to per-pod folders.

Used by the `host_run` behaviour, so that a build pod's git-clone init container really clones.
Paths the container would see (mountPaths, /dev/termination-log) are rewritten to host folders in
the command, the args, the env values and workingDir.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubesim.kubeapi import Kube, KubeError

TERMINATION_LOG = "/dev/termination-log"
MAX_TERMINATION_MESSAGE = 4096


class VolumeNotReady(Exception):
    """A volume source (Secret, ConfigMap) is missing; the kubelet retries, as a real one does."""


def _write_items(folder: Path, data: dict[str, bytes], items: list[dict[str, Any]] | None, mode: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    chosen = {i["key"]: i.get("path", i["key"]) for i in items} if items else {k: k for k in data}
    for key, rel in chosen.items():
        if key not in data:
            continue
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data[key])
        target.chmod(mode)


class PodSandbox:
    """The host folders standing in for one pod's volumes."""

    def __init__(self, base: Path, pod: dict[str, Any], kube: Kube) -> None:
        meta = pod["metadata"]
        self.pod = pod
        self.kube = kube
        self.root = base / f"{meta['namespace']}_{meta['name']}_{meta['uid'][:8]}"
        self.volumes: dict[str, Path] = {}
        self.prepared = False

    def prepare(self) -> None:
        """Create every volume folder once; raise VolumeNotReady when a source is missing."""
        if self.prepared:
            return
        ns = self.pod["metadata"]["namespace"]
        for vol in self.pod.get("spec", {}).get("volumes") or []:
            name = vol["name"]
            path = self.root / "volumes" / name
            if "hostPath" in vol:
                self.volumes[name] = Path(vol["hostPath"]["path"])
                continue
            if "secret" in vol:
                src = vol["secret"]
                try:
                    obj = self.kube.get(f"/api/v1/namespaces/{ns}/secrets/{src['secretName']}")
                except KubeError as exc:
                    if exc.status == 404 and not src.get("optional"):
                        raise VolumeNotReady(f'secret "{src["secretName"]}" not found') from exc
                    if exc.status != 404:
                        raise
                    obj = {}
                data = {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
                _write_items(path, data, src.get("items"), src.get("defaultMode", 0o644))
            elif "configMap" in vol:
                src = vol["configMap"]
                try:
                    obj = self.kube.get(f"/api/v1/namespaces/{ns}/configmaps/{src['name']}")
                except KubeError as exc:
                    if exc.status == 404 and not src.get("optional"):
                        raise VolumeNotReady(f'configmap "{src["name"]}" not found') from exc
                    if exc.status != 404:
                        raise
                    obj = {}
                data = {k: v.encode() for k, v in (obj.get("data") or {}).items()}
                data.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
                _write_items(path, data, src.get("items"), src.get("defaultMode", 0o644))
            else:
                # emptyDir and every other kind: an empty folder shared by the pod's containers.
                path.mkdir(parents=True, exist_ok=True)
            self.volumes[name] = path
        self.prepared = True

    def mounts(self, container: dict[str, Any], run_dir: Path) -> list[tuple[str, str]]:
        """Return (container path, host path) pairs, longest container path first."""
        pairs = []
        for m in container.get("volumeMounts") or []:
            host = self.volumes.get(m["name"])
            if host is None:
                continue
            if m.get("subPath"):
                host = host / m["subPath"]
                host.mkdir(parents=True, exist_ok=True)
            pairs.append((m["mountPath"].rstrip("/") or "/", str(host)))
        term = container.get("terminationMessagePath") or TERMINATION_LOG
        pairs.append((term, str(run_dir / "termination-log")))
        pairs.sort(key=lambda p: len(p[0]), reverse=True)
        return pairs

    def cleanup(self) -> None:
        """Remove the pod's folders."""
        shutil.rmtree(self.root, ignore_errors=True)


def remap(text: str, mounts: list[tuple[str, str]]) -> str:
    """Rewrite container paths inside a string to their host folders."""
    for cpath, hpath in mounts:
        # Only whole path components: /data must not rewrite /database or /x/data.
        pattern = r"(?<![\w./-])" + re.escape(cpath) + r"(?=/|$|[^\w.-])"
        text = re.sub(pattern, hpath.replace("\\", "\\\\"), text)
    return text


_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(text: str, env: dict[str, str]) -> str:
    """Expand $(VAR) references as Kubernetes does for command, args and env values."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env.get(name, m.group(0))

    return _VAR.sub(sub, text)


class HostProcess:
    """One run of a container's command on the host; lines and the exit go to callbacks."""

    def __init__(
        self, argv: list[str], env: dict[str, str], cwd: str, on_line: Callable[[str, str], None], on_exit: Callable[[int], None]
    ) -> None:
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.on_line = on_line
        self.on_exit = on_exit
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the process; a command that cannot start exits 127 with a message."""
        try:
            self.proc = subprocess.Popen(
                self.argv,
                env=self.env,
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            self.on_line("stderr", f"exec {self.argv[0]}: {exc.strerror}")
            threading.Thread(target=self.on_exit, args=(127,), daemon=True).start()
            return
        readers = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, "stdout"), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr, "stderr"), daemon=True),
        ]
        for t in readers:
            t.start()

        def waiter() -> None:
            assert self.proc is not None
            code = self.proc.wait()
            for t in readers:
                t.join(timeout=5)
            # A process killed by signal N reports 128+N, as container runtimes do.
            self.on_exit(128 - code if code < 0 else code)

        threading.Thread(target=waiter, daemon=True).start()

    def _pump(self, stream: Any, name: str) -> None:
        for raw in iter(stream.readline, b""):
            self.on_line(name, raw.decode(errors="replace").rstrip("\n"))
        stream.close()

    def kill(self, grace: float = 1.0) -> None:
        """Stop the process group: SIGTERM, then SIGKILL after `grace` seconds."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def host_argv(container: dict[str, Any], script: str | None, env: dict[str, str], mounts: list[tuple[str, str]]) -> list[str]:
    """Return the argv to run: `script` under /bin/sh, or the container's command and args."""
    if script:
        return ["/bin/sh", "-c", remap(script, mounts)]
    argv = [expand(a, env) for a in (container.get("command") or []) + (container.get("args") or [])]
    if not argv:
        # Without a command we cannot know the image's entrypoint; succeed quietly.
        return ["/bin/true"]
    return [remap(a, mounts) for a in argv]


def host_env(container_env: dict[str, str], mounts: list[tuple[str, str]], pod_name: str, home: Path) -> dict[str, str]:
    """Return the process env: a minimal host base plus the container's env, paths remapped."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(home),
        "HOSTNAME": pod_name,
        "LANG": "C.UTF-8",
    }
    for k, v in container_env.items():
        env[k] = remap(v, mounts) if v.startswith("/") else v
    return env


def host_cwd(container: dict[str, Any], mounts: list[tuple[str, str]], root: Path) -> str:
    """Return the working folder: workingDir remapped, or a scratch folder of the pod."""
    wd = container.get("workingDir")
    if wd:
        mapped = remap(wd, mounts)
        if mapped != wd or Path(wd).is_dir():
            Path(mapped).mkdir(parents=True, exist_ok=True)
            return mapped
        target = root / "rootfs" / wd.lstrip("/")
    else:
        target = root / "rootfs"
    target.mkdir(parents=True, exist_ok=True)
    return str(target)


def read_termination_message(run_dir: Path) -> str:
    """Return what the process wrote to its termination log, capped like the kubelet does."""
    try:
        return (run_dir / "termination-log").read_bytes()[:MAX_TERMINATION_MESSAGE].decode(errors="replace")
    except OSError:
        return ""
