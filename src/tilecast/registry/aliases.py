"""Alias moves with a history: every move is a registered-model tag, so promote and rollback can replay it.

History lives on the registered model as tags ``tilecast.alias_move.<time ns>.<random>`` whose value is
a JSON :class:`AliasMove`: alias, to-version (None: the alias was removed), UTC time, reason, the metrics
that justified it, and its ``kind`` (a ``move``, or a ``rollback`` naming the move it ``undoes``). The
version that receives the alias also gets the version tag ``tilecast.alias.<alias>.set_at``; the one
that loses it ``tilecast.alias.<alias>.removed_at``.

Concurrent jobs (two trainings, a training during a promotion) against one store, sqlite or a tracking
server, must neither crash nor lose a move. MLflow offers no lock and no compare-and-set, so:

- every move is its own tag under a name no other writer uses (append-only: nothing is read, changed
  and written back, so no move overwrites another);
- the history is the truth: its order is the order of the tag names (writer's clock, then the random
  part), each move's ``from_version`` is the previous recorded move's ``to_version``;
- after recording its move a writer *reconciles* the alias with the history: it reads both (one
  request) and, until they agree, points the alias at the last recorded move. Every write of an alias
  is followed by such a check by the same writer, so once the writers are done the alias is what the
  last recorded move says, whatever the interleaving;
- a write that loses MLflow's own insert race (``UNIQUE constraint failed`` when two writers tag the
  same version or set the same alias at once, ``database is locked``) is retried: the retry updates
  the row the other writer inserted.

Histories written before this layout (``tilecast.alias_move.000001``, sequential) are still read, and
ordered before the new records.
"""

from __future__ import annotations

import getpass
import json
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from mlflow import MlflowClient

from tilecast.atomic import crash_point
from tilecast.registry.models import RegistryError
from tilecast.signals import held

HISTORY_PREFIX = "tilecast.alias_move."
MOVE, ROLLBACK = "move", "rollback"
_LEGACY_ROLLBACK = "rollback of move #"  # reason of rollbacks recorded before ``kind`` existed
_MAX_METRICS = 40  # keep each tag value small (registry tag values are length-limited)
#: messages of a write that lost an insert race or met a busy database: retried
_TRANSIENT = ("UNIQUE constraint", "IntegrityError", "database is locked", "Duplicate entry", "duplicate key",
              "deadlock", "could not serialize")
_RETRIES = 8
_RECONCILE_ROUNDS = 20

T = TypeVar("T")


class NothingToRollBack(RegistryError):
    """A rollback with nothing older to restore; nothing was moved."""


@dataclass(frozen=True)
class AliasMove:
    """One alias move: ``alias`` went from ``from_version`` (None: new alias) to ``to_version`` (None: removed).

    ``seq`` is the move's 1-based position in the model's history, ``key`` its tag name; a ``rollback``
    names the ``key`` of the move it ``undoes``.
    """

    model: str
    alias: str
    from_version: str | None
    to_version: str | None
    time_utc: str
    reason: str
    metrics: dict[str, float] = field(default_factory=dict)
    user: str = ""
    seq: int = 0
    kind: str = MOVE
    undoes: str = ""
    key: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @property
    def is_rollback(self) -> bool:
        return self.kind == ROLLBACK or (self.kind == MOVE and self.reason.startswith(_LEGACY_ROLLBACK))

    def describe(self) -> str:
        """``v1 -> v2`` (``none`` for an alias that did not exist or was removed)."""
        return f"{_v(self.from_version)} -> {_v(self.to_version)}"


def _v(version: str | None) -> str:
    return "none" if version is None else f"v{version}"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name in some containers
        return ""


def is_transient(exc: BaseException) -> bool:
    """A registry write that lost an insert race or met a busy database (worth retrying)."""
    text = f"{type(exc).__name__}: {exc}"
    return any(t in text for t in _TRANSIENT)


def retry(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``call(*args, **kwargs)``, retried a few times (jittered back-off) on a transient registry error."""
    for attempt in range(_RETRIES):
        try:
            return call(*args, **kwargs)
        except Exception as exc:  # MlflowException, or the driver's error where a store does not wrap it
            if attempt == _RETRIES - 1 or not is_transient(exc):
                raise
            time.sleep(random.uniform(0.02, 0.1) * (attempt + 1))
    raise AssertionError("unreachable")


def _order(key: str) -> tuple[int, int, str]:
    suffix = key[len(HISTORY_PREFIX):]
    return (0, int(suffix), "") if suffix.isdigit() else (1, 0, suffix)


def _record(value: str) -> dict[str, Any]:
    known = {f.name for f in fields(AliasMove)}
    return {k: v for k, v in json.loads(value).items() if k in known}


def parse_history(model: str, tags: dict[str, str]) -> list[AliasMove]:
    """Every move recorded in a registered model's ``tags``, oldest first, with ``seq``, ``key`` and each
    move's ``from_version`` taken from the previous move of its alias."""
    keys = sorted((k for k in tags if k.startswith(HISTORY_PREFIX)), key=_order)
    out, last_to = [], {}
    for seq, key in enumerate(keys, start=1):
        try:
            move = AliasMove(**_record(tags[key]))
        except (ValueError, TypeError):  # not a record of ours
            continue
        from_version = last_to[move.alias] if move.alias in last_to else move.from_version
        move = replace(move, model=model, seq=seq, key=key, from_version=from_version,
                       to_version=None if move.to_version is None else str(move.to_version))
        last_to[move.alias] = move.to_version
        out.append(move)
    return out


def _reconcile(model: str, alias: str, client: MlflowClient) -> list[AliasMove]:
    """Point ``alias`` where its last recorded move says until a read shows both agreeing; the history."""
    for _ in range(_RECONCILE_ROUNDS):
        rm = client.get_registered_model(model)
        history = parse_history(model, rm.tags)
        mine = [m for m in history if m.alias == alias]
        have = rm.aliases.get(alias)
        have = None if have is None else str(have)
        if not mine or mine[-1].to_version == have:
            return history
        want = mine[-1].to_version
        if want is None:
            retry(client.delete_registered_model_alias, model, alias)
        else:
            retry(client.set_registered_model_alias, model, alias, want)
    raise RuntimeError(f"{model}@{alias} kept changing while its move was recorded; check alias_history()")


def move_alias(model: str, alias: str, version: str | int | None, *, reason: str,
               metrics: dict[str, float] | None = None, client: MlflowClient | None = None,
               kind: str = MOVE, undoes: str = "") -> AliasMove:
    """Point ``model@alias`` at ``version`` (None: remove the alias) and record the move (from, to, time,
    reason, metrics). Safe under concurrent writers (see the module docstring); returns the recorded move."""
    client = client or MlflowClient()
    version = None if version is None else str(version)
    if version is not None:
        client.get_model_version(model, version)  # raises if the version does not exist
    rm = client.get_registered_model(model)
    mine = [m for m in parse_history(model, rm.tags) if m.alias == alias]
    previous = mine[-1].to_version if mine else rm.aliases.get(alias)
    previous = None if previous is None else str(previous)
    kept = dict(sorted((metrics or {}).items())[:_MAX_METRICS])
    key = f"{HISTORY_PREFIX}{time.time_ns():020d}.{uuid.uuid4().hex[:12]}"
    move = AliasMove(model=model, alias=alias, from_version=previous, to_version=version, time_utc=_now(),
                     reason=reason, metrics={k: float(v) for k, v in kept.items()}, user=_user(), kind=kind,
                     undoes=undoes)
    with held(f"move of {model}@{alias}"):  # a SIGTERM / SIGINT waits until history and alias agree
        retry(client.set_registered_model_tag, model, key, move.to_json())
        crash_point("alias.recorded")
        history = _reconcile(model, alias, client)
        if version is not None:
            retry(client.set_model_version_tag, model, version, f"tilecast.alias.{alias}.set_at", move.time_utc)
        if previous is not None and previous != version:
            retry(client.set_model_version_tag, model, previous, f"tilecast.alias.{alias}.removed_at", move.time_utc)
    return next((m for m in history if m.key == key), replace(move, key=key))


def alias_history(model: str, alias: str | None = None, client: MlflowClient | None = None) -> list[AliasMove]:
    """Every recorded move of ``model`` (of one ``alias`` if given), oldest first."""
    client = client or MlflowClient()
    moves = parse_history(model, client.get_registered_model(model).tags)
    return [m for m in moves if alias is None or m.alias == alias]


def rollback_target(history: list[AliasMove]) -> AliasMove | None:
    """The move a rollback of this alias undoes next (its ``from_version`` is restored), None: nothing left.

    Replays the history as a stack: a move pushes itself, a rollback pops the move it undid. So a second
    rollback goes further back than the first, never undoes it (v1 -> v2 -> v4, rollback: v2, rollback: v1).
    """
    stack: list[AliasMove] = []
    for move in history:
        if move.is_rollback:
            undone = next((i for i in range(len(stack) - 1, -1, -1) if stack[i].key == move.undoes), None)
            if undone is not None:
                del stack[undone]
            elif stack and not move.undoes:  # recorded before rollbacks named what they undid
                stack.pop()
        elif move.from_version != move.to_version:
            stack.append(move)
    return stack[-1] if stack else None


def roll_back(model: str, alias: str, *, reason: str, allow_remove: bool = False,
              client: MlflowClient | None = None) -> AliasMove:
    """Undo the latest not yet undone move of ``model@alias``: point it at that move's ``from_version``.

    When that move created the alias (no version before it), the alias is removed if ``allow_remove``;
    otherwise (and when nothing is left to undo) :class:`NothingToRollBack` is raised, nothing moved.
    """
    client = client or MlflowClient()
    target = rollback_target(alias_history(model, alias, client))
    if target is None:
        raise NothingToRollBack(f"{model}@{alias} has no recorded move left to roll back")
    if target.from_version is None and not allow_remove:
        raise NothingToRollBack(f"{model}@{alias} {_v(target.to_version)} was the first {alias}: there is no "
                                f"previous one to restore")
    return move_alias(model, alias, target.from_version, client=client, kind=ROLLBACK, undoes=target.key,
                      reason=f"{reason}: rollback of move #{target.seq} ({target.describe()})",
                      metrics=dict(target.metrics))

