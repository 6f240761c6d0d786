"""What every agent-side command shares: the config file, the API address, and how a refusal
is printed (one line on stderr, exit status 2, never the secret)."""

from __future__ import annotations

import argparse
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from client.secrets import SecretSource

API_URL_ENV = "SERVICE_API_URL"
DEFAULT_API_URL = "http://127.0.0.1:8000"


def load_config(path: Path | None) -> dict[str, Any]:
    return tomllib.loads(path.read_text()) if path else {}


def api_url(args: argparse.Namespace, config: Mapping[str, Any], source: SecretSource) -> str:
    value = args.base_url or source.environ.get(API_URL_ENV) or config.get("base_url")
    return str(value or DEFAULT_API_URL).rstrip("/")


def refuse(exc: Exception) -> NoReturn:
    print(f"cairn: {exc}", file=sys.stderr)
    raise SystemExit(2)
