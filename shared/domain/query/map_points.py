"""Tolerant parsing of map-step output into MapPoints (LLMs break JSON in many small ways)."""

from __future__ import annotations

import json
import re

from shared.domain.models import MapPoint

_PAIR_RE = re.compile(
    r'"?description"?\s*:\s*"((?:[^"\\]|\\.)*)"\s*,?\s*"?score"?\s*:\s*"?(-?\d+(?:\.\d+)?)', re.S
)
_PAIR_REV_RE = re.compile(
    r'"?score"?\s*:\s*"?(-?\d+(?:\.\d+)?)"?\s*,?\s*"?description"?\s*:\s*"((?:[^"\\]|\\.)*)"', re.S
)
_REPORTS_RE = re.compile(r"Reports\s*\(([^)]*)\)")


def _cited(description: str) -> str:
    ids: list[str] = []
    for m in _REPORTS_RE.finditer(description):
        ids.extend(x.strip() for x in m.group(1).split(",") if x.strip() and x.strip() != "+more")
    return ",".join(dict.fromkeys(ids))


def _point(desc, score) -> MapPoint | None:
    if not isinstance(desc, str) or not desc.strip():
        return None
    try:
        s = float(score)
    except (TypeError, ValueError):
        s = 0.0
    return MapPoint(description=desc.strip(), score=max(0.0, min(100.0, s)), community_id=_cited(desc))


def _from_obj(obj) -> list[MapPoint]:
    items = obj.get("points", []) if isinstance(obj, dict) else obj if isinstance(obj, list) else []
    out = []
    for it in items if isinstance(items, list) else []:
        if isinstance(it, dict):
            p = _point(it.get("description") or it.get("answer"), it.get("score", 0))
            if p:
                out.append(p)
    return out


def _try_json(text: str):
    for candidate in (text, text.replace("'", '"')):
        fixed = re.sub(r",\s*([}\]])", r"\1", candidate)
        try:
            return json.loads(fixed)
        except (json.JSONDecodeError, ValueError):
            continue
    return None


def parse_map_points(text: str) -> list[MapPoint]:
    """Points from a map response: strict JSON, JSON inside prose/code fences, JSON with trailing
    commas or single quotes, a truncated JSON (pairs recovered by regex); else no points."""
    if not text or not text.strip():
        return []
    body = re.sub(r"^```(?:json)?\s*|\s*```$", "", text.strip(), flags=re.M)
    obj = _try_json(body)
    if obj is None:
        start, end = body.find("{"), body.rfind("}")
        if 0 <= start < end:
            obj = _try_json(body[start : end + 1])
    if obj is not None:
        points = _from_obj(obj)
        if points or isinstance(obj, dict | list):
            return points
    pts = [_point(_unescape(d), s) for d, s in _PAIR_RE.findall(body)]
    pts += [_point(_unescape(d), s) for s, d in _PAIR_REV_RE.findall(body)] if not pts else []
    return [p for p in pts if p]


def _unescape(s: str) -> str:
    try:
        return json.loads(f'"{s}"')
    except (json.JSONDecodeError, ValueError):
        return s
