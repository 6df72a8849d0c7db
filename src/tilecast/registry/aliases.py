"""Alias moves with a history: every move is a registered-model tag, so promote and rollback can replay it.

History lives on the registered model as tags ``tilecast.alias_move.<seq>`` (``seq`` zero-padded,
increasing) whose value is a JSON :class:`AliasMove`: alias, from/to version, UTC time, reason and
the metrics that justified it. The version that receives the alias also gets the version tag
``tilecast.alias.<alias>.set_at``; the one that loses it ``tilecast.alias.<alias>.removed_at``.
"""

from __future__ import annotations

import getpass
import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

from mlflow import MlflowClient

HISTORY_PREFIX = "tilecast.alias_move."
_MAX_METRICS = 40  # keep each tag value small (registry tag values are length-limited)


@dataclass(frozen=True)
class AliasMove:
    """One alias move: ``alias`` went from ``from_version`` (None: new alias) to ``to_version``."""

    model: str
    alias: str
    from_version: str | None
    to_version: str
    time_utc: str
    reason: str
    metrics: dict[str, float] = field(default_factory=dict)
    user: str = ""
    seq: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name in some containers
        return ""


def _history_tags(tags: dict[str, str]) -> list[tuple[int, str]]:
    out = []
    for key, value in tags.items():
        if key.startswith(HISTORY_PREFIX) and key[len(HISTORY_PREFIX):].isdigit():
            out.append((int(key[len(HISTORY_PREFIX):]), value))
    return sorted(out)


def move_alias(model: str, alias: str, version: str | int, *, reason: str,
               metrics: dict[str, float] | None = None, client: MlflowClient | None = None) -> AliasMove:
    """Point ``model@alias`` at ``version`` and record the move (from, to, time, reason, metrics)."""
    client = client or MlflowClient()
    rm = client.get_registered_model(model)
    version = str(version)
    client.get_model_version(model, version)  # raises if the version does not exist
    previous = rm.aliases.get(alias)
    previous = str(previous) if previous is not None else None
    history = _history_tags(rm.tags)
    seq = (history[-1][0] + 1) if history else 1
    kept = dict(sorted((metrics or {}).items())[:_MAX_METRICS])
    move = AliasMove(model=model, alias=alias, from_version=previous, to_version=version, time_utc=_now(),
                     reason=reason, metrics={k: float(v) for k, v in kept.items()}, user=_user(), seq=seq)
    client.set_registered_model_alias(model, alias, version)
    client.set_registered_model_tag(model, f"{HISTORY_PREFIX}{seq:06d}", move.to_json())
    client.set_model_version_tag(model, version, f"tilecast.alias.{alias}.set_at", move.time_utc)
    if previous is not None and previous != version:
        client.set_model_version_tag(model, previous, f"tilecast.alias.{alias}.removed_at", move.time_utc)
    return move


def alias_history(model: str, alias: str | None = None, client: MlflowClient | None = None) -> list[AliasMove]:
    """Every recorded move of ``model`` (of one ``alias`` if given), oldest first."""
    client = client or MlflowClient()
    moves = [AliasMove(**json.loads(value)) for _, value in _history_tags(client.get_registered_model(model).tags)]
    return [m for m in moves if alias is None or m.alias == alias]
