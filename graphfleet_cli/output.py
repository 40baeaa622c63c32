"""How the CLI prints a result: one JSON object (``--json``) or ``key: value`` lines."""

from __future__ import annotations

import json


def print_json(obj: dict) -> None:
    print(json.dumps(obj, ensure_ascii=False))


def emit(obj: dict, as_json: bool) -> None:
    if as_json:
        print_json(obj)
    else:
        for key, value in obj.items():
            print(f"{key}: {json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value}")
