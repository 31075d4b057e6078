"""Write the API's OpenAPI schema to docs/openapi.yaml (tests/api/test_schema.py checks it is current).

.venv/bin/python scripts/gen_openapi.py           # rewrite the file
.venv/bin/python scripts/gen_openapi.py --check   # exit 1 if the file is out of date
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "openapi.yaml"


def render() -> str:
    """Return the schema as served at /api/v1/schema/, in YAML."""
    from django.test import Client

    response = Client().get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi", HTTP_HOST="localhost")
    if response.status_code != 200:
        raise SystemExit(f"the schema view answered {response.status_code}: {response.content[:500]!r}")
    return response.content.decode()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when docs/openapi.yaml is out of date")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")
    import django

    django.setup()
    text = render()
    if args.check:
        if not OUTPUT.exists() or OUTPUT.read_text() != text:
            print(f"{OUTPUT.relative_to(ROOT)} is out of date: run scripts/gen_openapi.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
