"""Where the CLI keeps the server URL and token: ~/.config/slipway/config.json, readable by its owner only."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path


class ConfigError(Exception):
    """The CLI does not know which server to talk to, or with which token."""


@dataclass(frozen=True)
class Config:
    url: str
    token: str


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "slipway" / "config.json"


def normalise_url(url: str) -> str:
    """Return the server's base URL: scheme and host, no trailing slash or /api/v1."""
    url = url.strip().rstrip("/")
    if url.endswith("/api/v1"):
        url = url[: -len("/api/v1")]
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"The server URL must start with http:// or https://, e.g. https://slipway.example.com (got {url!r}).")
    return url


def save(config: Config, path: Path | None = None) -> Path:
    """Write the configuration with mode 600, so other users of the machine cannot read the token."""
    path = path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"url": config.url, "token": config.token}, f, indent=2)
        f.write("\n")
    os.chmod(path, 0o600)
    return path


def load(path: Path | None = None) -> Config:
    """Return the configuration: SLIPWAY_URL and SLIPWAY_TOKEN win over the file."""
    path = path or config_path()
    stored: dict[str, str] = {}
    if path.exists():
        try:
            stored = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise ConfigError(f"Cannot read {path}: {e}. Run `slipway login URL` again.") from e
    url = os.environ.get("SLIPWAY_URL") or stored.get("url", "")
    token = os.environ.get("SLIPWAY_TOKEN") or stored.get("token", "")
    if not url:
        raise ConfigError("Not logged in: run `slipway login URL` (or set SLIPWAY_URL and SLIPWAY_TOKEN).")
    if not token:
        raise ConfigError("No API token: run `slipway login URL` (or set SLIPWAY_TOKEN).")
    return Config(url=normalise_url(url), token=token)
