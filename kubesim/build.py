"""Build kube-apiserver, kube-controller-manager and kube-scheduler from Debian's source package.

Debian 12 ships Kubernetes v1.20.2 as the source package ``kubernetes``. We build it once per
machine into a cache folder and reuse the binaries until the source version or our patch changes.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
APT_PACKAGES = (
    "dpkg-dev",
    "golang-go",
    "etcd-server",
    "etcd-client",
    "rsync",
    "jq",
    "golang-github-modern-go-reflect2-dev",
)
# The version we know builds; a newer Debian revision is built too, with its own cache entry.
KNOWN_VERSION = "1.20.5+really1.20.2-1.1+deb12u1"
REFLECT2_SRC = Path("/usr/share/gocode/src/github.com/modern-go/reflect2")
DEB_SRC_FILE = Path("/etc/apt/sources.list.d/slipway-deb-src.sources")
DEBIAN_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")

# Everything that changes the produced binaries besides the source version. Edit it (and so the
# hash) whenever the build recipe changes, so that machines rebuild instead of reusing old binaries.
PATCH_RECIPE = """
vendor/github.com/modern-go/reflect2: replace *.go and *.s with v1.0.2 (Debian
golang-github-modern-go-reflect2-dev); vendor/modules.txt: v1.0.1 -> v1.0.2.
make WHAT="cmd/kube-apiserver cmd/kube-controller-manager cmd/kube-scheduler"
GOPATH mode, GOPROXY=off, CGO_ENABLED=0.
"""
PATCH_HASH = hashlib.sha256(PATCH_RECIPE.encode()).hexdigest()[:12]

NO_SOURCE_HELP = """\
kubesim: cannot build Kubernetes here: {reason}

kubesim builds kube-apiserver, kube-controller-manager and kube-scheduler from Debian 12's
source package `kubernetes` (needs a deb-src entry and these packages:
  apt-get install -y {packages}).

Without them, point Slipway at a real cluster instead:
  export KUBECONFIG=/path/to/kubeconfig
and run the tests or the app against it (tests that need kubesim are skipped or use KUBECONFIG)."""


class BuildError(Exception):
    """Raised when the binaries cannot be built; the message says what to do."""


def cache_root() -> Path:
    """Return the folder that holds one subfolder per built version."""
    env = os.environ.get("KUBESIM_CACHE")
    if env:
        return Path(env).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "slipway" / "kubesim"


def cache_dir(version: str) -> Path:
    """Return the cache folder for one source version built with the current patch."""
    return cache_root() / f"{version}-{PATCH_HASH}"


def _stamp_ok(folder: Path) -> bool:
    stamp = folder / "stamp.json"
    if not stamp.is_file():
        return False
    try:
        data = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return False
    if data.get("patch_hash") != PATCH_HASH:
        return False
    return all(os.access(folder / "bin" / name, os.X_OK) for name in BINARIES)


def find_cached(version: str | None = None) -> Path | None:
    """Return the bin folder of a valid cached build (of `version` if given), newest first."""
    if version:
        folder = cache_dir(version)
        return folder / "bin" if _stamp_ok(folder) else None
    root = cache_root()
    if not root.is_dir():
        return None
    candidates = [p for p in root.iterdir() if p.name.endswith(f"-{PATCH_HASH}") and _stamp_ok(p)]
    candidates.sort(key=lambda p: (p / "stamp.json").stat().st_mtime, reverse=True)
    return candidates[0] / "bin" if candidates else None


@contextmanager
def _file_lock(path: Path, timeout: float = 1800.0) -> Iterator[None]:
    """Hold an exclusive lock on `path`, so concurrent builds wait for each other."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        deadline = time.monotonic() + timeout
        announced = False
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise BuildError(f"timed out waiting for the build lock {path}") from None
                if not announced:
                    print(f"kubesim: another build holds {path}; waiting", file=sys.stderr)
                    announced = True
                time.sleep(1.0)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run(
    cmd: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None, log: Path | None = None, timeout: float = 3600
) -> str:
    """Run a command, appending its output to the log as it comes; raise BuildError with its tail on failure."""
    with tempfile.TemporaryFile(mode="w+") as out:
        if log is not None:
            with open(log, "a") as fh:
                fh.write(f"$ {' '.join(cmd)}\n")
        # Stream into the log file itself, so `tail -f build.log` shows a long build progressing.
        sink = open(log, "a") if log is not None else out  # noqa: SIM115 - closed below
        try:
            proc = subprocess.run(
                cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT, timeout=timeout
            )
        except subprocess.TimeoutExpired as exc:
            raise BuildError(f"{' '.join(cmd)} timed out after {timeout:.0f}s") from exc
        except FileNotFoundError as exc:
            raise BuildError(f"{cmd[0]} is not installed") from exc
        finally:
            if sink is not out:
                sink.close()
        if log is not None:
            lines = log.read_text(errors="replace").splitlines()
        else:
            out.seek(0)
            lines = out.read().splitlines()
    if proc.returncode != 0:
        tail = "\n".join(lines[-30:])
        raise BuildError(f"{' '.join(cmd)} failed with exit code {proc.returncode}:\n{tail}")
    return "\n".join(lines)


def _apt_env() -> dict[str, str]:
    return {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}


def _missing_packages() -> list[str]:
    missing = []
    for pkg in APT_PACKAGES:
        proc = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
        if "install ok installed" not in proc.stdout:
            missing.append(pkg)
    return missing


def _has_deb_src() -> bool:
    folder = Path("/etc/apt/sources.list.d")
    files = list(folder.glob("*.sources")) + list(folder.glob("*.list"))
    files.append(Path("/etc/apt/sources.list"))
    for f in files:
        try:
            text = f.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            stripped = line.strip()
            if stripped.startswith("deb-src ") or (stripped.startswith("Types:") and "deb-src" in stripped.split()):
                return True
    return False


def _source_version() -> str | None:
    """Return the candidate version of the `kubernetes` source package, if apt knows it."""
    proc = subprocess.run(["apt-cache", "showsrc", "kubernetes"], capture_output=True, text=True)
    versions = [line.split(":", 1)[1].strip() for line in proc.stdout.splitlines() if line.startswith("Version:")]
    if not versions:
        return None
    # Pick the highest with dpkg's own ordering.
    best = versions[0]
    for v in versions[1:]:
        if subprocess.run(["dpkg", "--compare-versions", v, "gt", best]).returncode == 0:
            best = v
    return best


def ensure_prerequisites(*, log: Path | None = None) -> None:
    """Add the deb-src entry and install build packages when root; otherwise explain."""
    is_root = os.geteuid() == 0
    need_src = not _has_deb_src()
    missing = _missing_packages()
    if not need_src and not missing:
        return
    if not is_root:
        steps = []
        if need_src:
            steps.append(f"  sed 's/^Types: deb$/Types: deb-src/' {DEBIAN_SOURCES} | sudo tee {DEB_SRC_FILE}")
        steps.append("  sudo apt-get update")
        if missing:
            steps.append(f"  sudo apt-get install -y {' '.join(missing)}")
        raise BuildError("kubesim needs root to prepare the build. Run:\n" + "\n".join(steps))
    if need_src:
        if not DEBIAN_SOURCES.is_file():
            raise BuildError(
                NO_SOURCE_HELP.format(
                    reason=f"{DEBIAN_SOURCES} not found (not a Debian 12 machine?)", packages=" ".join(APT_PACKAGES)
                )
            )
        text = DEBIAN_SOURCES.read_text()
        src = "\n".join("Types: deb-src" if line.strip() == "Types: deb" else line for line in text.splitlines()) + "\n"
        DEB_SRC_FILE.write_text(src)
        print(f"kubesim: added {DEB_SRC_FILE}", file=sys.stderr)
    print("kubesim: apt-get update", file=sys.stderr)
    _run(["apt-get", "update", "-q"], env=_apt_env(), log=log, timeout=600)
    missing = _missing_packages()
    if missing:
        print(f"kubesim: apt-get install {' '.join(missing)}", file=sys.stderr)
        _run(["apt-get", "install", "-y", "-q", *missing], env=_apt_env(), log=log, timeout=1200)


def _apply_reflect2_fix(tree: Path) -> None:
    """Replace the vendored reflect2 v1.0.1, which crashes under Go 1.18+, with v1.0.2."""
    vendored = tree / "vendor/github.com/modern-go/reflect2"
    if not REFLECT2_SRC.is_dir():
        raise BuildError(f"{REFLECT2_SRC} is missing: apt-get install golang-github-modern-go-reflect2-dev")
    for old in list(vendored.glob("*.go")) + list(vendored.glob("*.s")):
        old.unlink()
    for new in list(REFLECT2_SRC.glob("*.go")) + list(REFLECT2_SRC.glob("*.s")):
        shutil.copy2(new, vendored / new.name)
    modules = tree / "vendor/modules.txt"
    lines = modules.read_text().splitlines(keepends=True)
    fixed = [
        line.replace("github.com/modern-go/reflect2 v1.0.1", "github.com/modern-go/reflect2 v1.0.2")
        if line.startswith("# github.com/modern-go/reflect2")
        else line
        for line in lines
    ]
    modules.write_text("".join(fixed))


def _compile(tree: Path, log: Path) -> Path:
    gopath = tree / ".go"
    link = gopath / "src/k8s.io/kubernetes"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.exists():
        link.symlink_to(tree)
    home = tree.parent / "home"
    home.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "GOPATH": str(gopath),
        "PATH": "/usr/lib/go/bin:" + os.environ.get("PATH", "/usr/bin:/bin"),
        "CGO_ENABLED": "0",
        "GOPROXY": "off",
        "GOFLAGS": "",
        "HOME": str(home),
        "GOCACHE": str(tree.parent / "gocache"),
    }
    what = " ".join(f"cmd/{name}" for name in BINARIES)
    _run(["make", f"WHAT={what}"], cwd=link, env=env, log=log, timeout=3600)
    return tree / "_output/bin"


def build(*, force: bool = False, quiet: bool = False) -> Path:
    """Return the bin folder with the three binaries, building them first if needed."""

    def say(msg: str) -> None:
        if not quiet:
            print(f"kubesim: {msg}", file=sys.stderr, flush=True)

    lock = cache_root() / ".build.lock"
    with _file_lock(lock):
        cached = find_cached()
        log = cache_root() / "build.log"
        if shutil.which("apt-get") is None:
            if cached:
                return cached
            raise BuildError(NO_SOURCE_HELP.format(reason="apt-get is not available", packages=" ".join(APT_PACKAGES)))
        version = _source_version() if _has_deb_src() else None
        if version:
            hit = find_cached(version)
            if hit and not force:
                say(f"using cached binaries in {hit}")
                return hit
        elif cached and not force:
            # No deb-src configured (yet): any build made with the current patch is good.
            say(f"using cached binaries in {cached}")
            return cached
        started = time.monotonic()
        log.write_text("")
        ensure_prerequisites(log=log)
        version = _source_version()
        if not version:
            raise BuildError(
                NO_SOURCE_HELP.format(
                    reason="apt knows no source package `kubernetes` (deb-src entry missing or not Debian 12)",
                    packages=" ".join(APT_PACKAGES),
                )
            )
        hit = find_cached(version)
        if hit and not force:
            say(f"using cached binaries in {hit}")
            return hit
        target = cache_dir(version)
        with tempfile.TemporaryDirectory(prefix="kubesim-build-") as tmp:
            work = Path(tmp)
            say(f"apt-get source kubernetes={version} in {work}")
            _run(["apt-get", "source", "-q", f"kubernetes={version}"], cwd=work, env=_apt_env(), log=log, timeout=900)
            trees = [p for p in work.iterdir() if p.is_dir() and p.name.startswith("kubernetes-")]
            if len(trees) != 1:
                raise BuildError(f"unexpected source layout in {work}: {os.listdir(work)}")
            tree = trees[0]
            _apply_reflect2_fix(tree)
            say(f"building kube-apiserver, kube-controller-manager, kube-scheduler (about 5 minutes on 2 cores; log: {log})")
            out = _compile(tree, log)
            staging = target.with_name(target.name + ".partial")
            shutil.rmtree(staging, ignore_errors=True)
            (staging / "bin").mkdir(parents=True)
            for name in BINARIES:
                shutil.copy2(out / name, staging / "bin" / name)
            stamp = {
                "version": version,
                "patch_hash": PATCH_HASH,
                "recipe": PATCH_RECIPE.strip(),
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "build_seconds": round(time.monotonic() - started, 1),
            }
            (staging / "stamp.json").write_text(json.dumps(stamp, indent=2) + "\n")
            shutil.rmtree(target, ignore_errors=True)
            staging.rename(target)
        say(f"built in {time.monotonic() - started:.0f}s: {target / 'bin'}")
        return target / "bin"


def install_prebuilt(src_bin: Path, version: str = KNOWN_VERSION) -> Path:
    """Copy already built binaries (patched as in PATCH_RECIPE) into the cache."""
    target = cache_dir(version)
    with _file_lock(cache_root() / ".build.lock"):
        (target / "bin").mkdir(parents=True, exist_ok=True)
        for name in BINARIES:
            shutil.copy2(src_bin / name, target / "bin" / name)
        stamp = {
            "version": version,
            "patch_hash": PATCH_HASH,
            "recipe": PATCH_RECIPE.strip(),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        (target / "stamp.json").write_text(json.dumps(stamp, indent=2) + "\n")
    return target / "bin"
