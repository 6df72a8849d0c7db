"""Promotion: ``@champion`` only ever moves to something measurably no worse; rollback restores the previous one.

The suite (the same for both sides): per family, kernel MAPE on the GPUs no family trained on
(mean of the per-GPU MAPEs of their kernel test rows; for ``tc_gemm`` Vidur's A40 linear layers; for
the attention and half-vector families, which no public GPU outside their training data measures, the
validation MAPE their training runs logged), and the mean APE of end-to-end forecasts of every shipped
label (spec sheet only, no calibration). The candidate set is the current champions
with the promoted families' ``@challenger`` versions swapped in. It is promoted when

- it fails no more end-to-end labels than the current set, and its end-to-end mean APE improves or ties
  (``<= current + e2e_tolerance_pct``), and
- no promoted family's unseen-GPU kernel MAPE is worse than its champion's by more than
  ``kernel_tolerance_pct`` points, and
- leave-one-GPU-out (the project's model-selection criterion, :mod:`tilecast.predictors.logo`, as the
  versions' training runs logged it with ``python jobs/train.py logo=true``): no promoted family's LOGO mean
  over left-out GPUs is worse than its champion's by more than ``logo_tolerance_pct`` points, nor its worst
  left-out GPU by more than ``logo_worst_tolerance_pct`` points. A challenger whose run has no LOGO figure is
  refused (the reason names the train command that logs one) unless ``require_logo`` is off; a champion
  without one (a version trained before, or without ``logo=true``) skips this gate for its family, and the
  reasons say so;

and unconditionally when no family has a champion yet (first promotion). The family gates apply to the
promoted families whose challenger differs from their champion: a family that has no champion is compared
against nothing (its challenger fills the current set too). Every move is recorded on the registered model
(:mod:`tilecast.registry.aliases`) with the metrics that justified it, and the servable
``tilecast-forecaster`` is registered for the new set.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import mlflow
import numpy as np
import pandas as pd
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from tilecast.atomic import crash_point
from tilecast.errors import UserError
from tilecast.evaluation.labels import LabelSet, shipped_labels
from tilecast.evaluation.suite import build_frames, forecast_labels
from tilecast.metrics import ape_pct
from tilecast.predictors import KernelPredictor, evaluation_rows
from tilecast.predictors.rows import UNSEEN_GPUS, precision_gate_rows
from tilecast.registry.aliases import ROLLBACK, AliasMove, alias_history, move_alias, rollback_target
from tilecast.registry.forecaster import (
    FORECASTER_NAME,
    as_family_predictor,
    bundle_of,
    find_forecaster,
    predictors_from_versions,
    register_forecaster,
)
from tilecast.registry.lineage import log_lineage
from tilecast.registry.models import IncompatibleModelError, model_name
from tilecast.registry.tracking import ensure_experiment
from tilecast.signals import held
from tilecast.specs import get_gpu
from tilecast.tiles.ops import FAMILIES, FP32_FAMILIES, PRECISION_FAMILIES

log = logging.getLogger("tilecast.promote")

CHAMPION, CHALLENGER = "champion", "challenger"


class PromotionRefused(RuntimeError):
    """The challenger is not promoted (or cannot be); the message is the reason. The champion is untouched."""


@dataclass(frozen=True)
class PromotionPolicy:
    """Gates of a promotion (points of percentage error) and the GPUs kernel MAPE is measured on."""

    kernel_tolerance_pct: float = 1.0
    e2e_tolerance_pct: float = 0.0
    unseen_gpus: tuple[str, ...] = UNSEEN_GPUS
    logo_tolerance_pct: float = 1.0  # points of leave-one-GPU-out mean MAPE a family may lose
    logo_worst_tolerance_pct: float = 3.0  # points of its worst left-out GPU's MAPE (one GPU: noisier)
    require_logo: bool = True  # refuse a challenger whose training run logged no LOGO figure

    def __post_init__(self) -> None:
        for name in ("kernel_tolerance_pct", "e2e_tolerance_pct", "logo_tolerance_pct", "logo_worst_tolerance_pct"):
            if getattr(self, name) < 0:
                raise UserError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        for key in self.unseen_gpus:
            get_gpu(key)


@dataclass(frozen=True)
class LogoFigure:
    """A version's leave-one-GPU-out figures as its training run logged them."""

    mean_pct: float
    worst_pct: float
    worst_gpu: str = "?"
    gpus: tuple[str, ...] = ()  # the left-out GPUs (empty: not recorded)
    per_gpu: Mapping[str, float] = field(default_factory=dict)  # left-out GPU -> its MAPE, where logged

    def describe(self) -> str:
        return f"mean {self.mean_pct:.2f}%, worst {self.worst_pct:.2f}% ({self.worst_gpu})"

    def over(self, gpus: Iterable[str]) -> LogoFigure:
        """The figure over the left-out GPUs ``gpus`` only (from the per-GPU figures)."""
        part = {g: self.per_gpu[g] for g in gpus}
        worst = max(part, key=part.get)
        return LogoFigure(float(np.mean(list(part.values()))), part[worst], worst, tuple(sorted(part)), part)


@dataclass
class SuiteScore:
    """One set of family versions measured on the suite (``logo``: the families whose runs logged one)."""

    versions: dict[str, str]
    kernel_mape_pct: dict[str, float]
    e2e_mean_ape_pct: float
    e2e_failed: int
    table: pd.DataFrame = field(repr=False)
    logo: dict[str, LogoFigure] = field(default_factory=dict)

    def metrics(self, prefix: str) -> dict[str, float]:
        out = {f"{prefix}.kernel_mape_pct.{f}": v for f, v in self.kernel_mape_pct.items()}
        for f, figure in self.logo.items():
            out[f"{prefix}.logo_mape_pct.{f}"] = figure.mean_pct
            out[f"{prefix}.logo_worst_mape_pct.{f}"] = figure.worst_pct
        out[f"{prefix}.e2e_mean_ape_pct"] = self.e2e_mean_ape_pct
        return out


@dataclass
class PromotionResult:
    """What a promotion did: the decision, both scores, the alias moves and the forecaster version."""

    promoted: bool
    reason: str
    first: bool
    families: tuple[str, ...]
    current: SuiteScore | None
    candidate: SuiteScore
    moves: list[AliasMove]
    forecaster_version: str | None = None
    run_id: str = ""


def alias_versions(alias: str, families: Iterable[str], client: MlflowClient | None = None) -> dict[str, str | None]:
    """Version behind ``tilecast-<family>@<alias>`` for each family (None: no such alias or model). No fallback."""
    client = client or MlflowClient()
    out: dict[str, str | None] = {}
    for fam in families:
        try:
            aliases = client.get_registered_model(model_name(fam)).aliases
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
                raise
            aliases = {}
        out[fam] = str(aliases[alias]) if alias in aliases else None
    return out


def unseen_kernel_rows(families: Iterable[str], policy: PromotionPolicy) -> dict[str, pd.DataFrame]:
    """Kernel test rows of every family on the GPUs it never trained on (the kernel half of the suite):
    the policy's unseen GPUs for the fp32 families; for the precision-path families the data's GPUs they
    never see (:func:`~tilecast.predictors.rows.precision_gate_rows`)."""
    devices = [get_gpu(k).device_name for k in policy.unseen_gpus]
    return {fam: precision_gate_rows(fam) if fam in PRECISION_FAMILIES else evaluation_rows(fam, devices=devices)
            for fam in families}


def _training_run(family: str, version: str):
    """The run that logged ``tilecast-<family>`` v``version`` (None when it has none or it is gone)."""
    client = MlflowClient()
    try:
        run_id = client.get_model_version(model_name(family), str(version)).run_id
        return client.get_run(run_id) if run_id else None
    except MlflowException:
        return None


def _validation_mape(family: str, version: str) -> float:
    """The version's validation MAPE as its training run logged it (NaN when not logged)."""
    run = _training_run(family, version)
    return float(run.data.metrics.get("val_mape_pct", np.nan)) if run else float("nan")


def logo_figure(family: str, version: str) -> LogoFigure | None:
    """The version's leave-one-GPU-out figures as its training run logged them (None: trained without
    ``logo=true``)."""
    run = _training_run(family, version)
    metrics = run.data.metrics if run else {}
    if "logo_mape_pct" not in metrics or "logo_worst_mape_pct" not in metrics:
        return None
    tags = run.data.tags
    gpus = tuple(g for g in tags.get("tilecast.logo_gpus", "").split(",") if g)
    per_gpu = {k.removeprefix("logo_mape_pct."): float(v) for k, v in metrics.items()
               if k.startswith("logo_mape_pct.")}
    return LogoFigure(float(metrics["logo_mape_pct"]), float(metrics["logo_worst_mape_pct"]),
                      tags.get("tilecast.logo_worst_gpu", "?"), gpus, per_gpu)


def kernel_mape(predictor, rows: pd.DataFrame) -> float:
    """Mean over GPUs of the MAPE of ``predictor`` on ``rows`` (each row's ``Device``)."""
    if rows.empty:
        return float("nan")
    ape = ape_pct(np.asarray(predictor.predict_ms(rows), dtype=float), rows["Latency"].to_numpy(float))
    return float(pd.Series(ape).groupby(rows["Device"].to_numpy()).mean().mean())


def suite_predictors(versions: Mapping[str, str], in_memory: Mapping[str, KernelPredictor] | None = None
                     ) -> dict[str, KernelPredictor]:
    """The predictor of each family's version: ``in_memory`` where given (a version just trained in this process,
    not loaded back), else loaded from the registry (once per process)."""
    in_memory = dict(in_memory or {})
    loaded = predictors_from_versions({f: v for f, v in versions.items() if f not in in_memory})
    return {f: in_memory[f] if f in in_memory else loaded[f] for f in versions}


def check_loadable(versions: Mapping[str, str], aliases: Mapping[str, str]) -> None:
    """Load every ``tilecast-<family>`` version of ``versions`` (cached for scoring); one that cannot be
    loaded raises :class:`IncompatibleModelError` naming it and ``aliases[family]``, before anything moves."""
    for fam, version in versions.items():
        try:
            predictors_from_versions({fam: version})
        except IncompatibleModelError as exc:
            raise exc.at_alias(aliases[fam]) from None


def score_suite(versions: Mapping[str, str], labels: pd.DataFrame, kernel_rows: Mapping[str, pd.DataFrame],
                frames: tuple[dict, dict] | None = None, predictors: Mapping[str, KernelPredictor] | None = None
                ) -> SuiteScore:
    """Measure one set of family versions: kernel MAPE (families of ``kernel_rows``) and e2e mean APE. Plain code
    over the versions' ``predictors`` in memory (family -> predictor: :func:`suite_predictors`); loaded from the
    registry when not given."""
    predictors = dict(predictors) if predictors is not None else predictors_from_versions(versions)
    # a family with no unseen-GPU rows (attention, half vector ops) is gated on its validation MAPE
    kmape = {fam: kernel_mape(predictors[fam], rows) if len(rows) else _validation_mape(fam, versions[fam])
             for fam, rows in kernel_rows.items()}
    table = forecast_labels(labels, as_family_predictor(predictors), frames=frames)
    ok = table["pred_ms"].notna()
    logo = {fam: figure for fam in kernel_rows if (figure := logo_figure(fam, versions[fam])) is not None}
    return SuiteScore(dict(versions), kmape, float(table.loc[ok, "ape_pct"].mean()), int((~ok).sum()), table, logo)


def decide(current: SuiteScore | None, candidate: SuiteScore, families: Iterable[str],
           policy: PromotionPolicy) -> tuple[bool, list[str]]:
    """(promote?, reasons): the gates of the module docstring; ``current`` None is a first promotion."""
    if current is None:
        return True, ["first promotion: no champion yet"]
    reasons, ok, no_logo = [], True, []
    if candidate.e2e_failed > current.e2e_failed:
        ok = False
        reasons.append(f"challenger fails {candidate.e2e_failed} end-to-end labels, champion {current.e2e_failed}")
    limit = current.e2e_mean_ape_pct + policy.e2e_tolerance_pct + 1e-9
    verdict = "improves or ties" if candidate.e2e_mean_ape_pct <= limit else "is worse"
    ok &= candidate.e2e_mean_ape_pct <= limit
    reasons.append(f"end-to-end mean APE {candidate.e2e_mean_ape_pct:.3f}% vs champion "
                   f"{current.e2e_mean_ape_pct:.3f}%: {verdict}")
    for fam in families:
        new, old = candidate.kernel_mape_pct.get(fam), current.kernel_mape_pct.get(fam)
        if new is None or old is None or candidate.versions.get(fam) == current.versions.get(fam):
            continue
        if new > old + policy.kernel_tolerance_pct:
            ok = False
            reasons.append(f"{fam}: unseen-GPU kernel MAPE {new:.2f}% vs champion {old:.2f}% "
                           f"(worse by more than {policy.kernel_tolerance_pct:g} points)")
        else:
            reasons.append(f"{fam}: unseen-GPU kernel MAPE {new:.2f}% vs champion {old:.2f}%")
    for fam in families:
        if fam not in candidate.versions or candidate.versions.get(fam) == current.versions.get(fam):
            continue
        new_logo, old_logo = candidate.logo.get(fam), current.logo.get(fam)
        if new_logo is None and policy.require_logo:
            no_logo.append(fam)
        elif new_logo is None:
            reasons.append(f"{fam}: the challenger has no leave-one-GPU-out figure: LOGO gate skipped "
                           f"(require_logo=false)")
        elif old_logo is None:
            reasons.append(f"{fam}: the champion (v{current.versions.get(fam)}) has no leave-one-GPU-out figure "
                           f"(trained without logo=true): LOGO gate skipped; challenger {new_logo.describe()}")
        else:
            passed, line = _logo_gate(fam, new_logo, old_logo, policy)
            ok &= passed
            reasons.append(line)
    if no_logo:
        ok = False
        reasons.append(f"no leave-one-GPU-out figure on the challenger of {', '.join(no_logo)}: train it with "
                       f"`python jobs/train.py families=[{','.join(no_logo)}] logo=true` (and its predictor and "
                       f"params), or promote with require_logo=false")
    return ok, reasons


def _logo_gate(family: str, new: LogoFigure, old: LogoFigure, policy: PromotionPolicy) -> tuple[bool, str]:
    """The LOGO gate of one family: (passed?, reason line). When the two versions' folds left out other GPUs
    (trained on other rows), both are compared over the GPUs they share, which the line says."""
    note = ""
    common = sorted(set(new.per_gpu) & set(old.per_gpu))
    if set(new.per_gpu) != set(old.per_gpu) and common:
        note = f" (over the left-out GPUs both have: {','.join(common)})"
        new, old = new.over(common), old.over(common)
    elif new.gpus and old.gpus and set(new.gpus) != set(old.gpus):
        note = f" (over other left-out GPUs: {','.join(new.gpus)} vs {','.join(old.gpus)})"
    worse = []
    if new.mean_pct > old.mean_pct + policy.logo_tolerance_pct:
        worse.append(f"mean worse by more than {policy.logo_tolerance_pct:g} points")
    if new.worst_pct > old.worst_pct + policy.logo_worst_tolerance_pct:
        worse.append(f"worst GPU worse by more than {policy.logo_worst_tolerance_pct:g} points")
    line = (f"{family}: leave-one-GPU-out MAPE mean {new.mean_pct:.2f}% vs champion {old.mean_pct:.2f}%, worst "
            f"{new.worst_pct:.2f}% ({new.worst_gpu}) vs {old.worst_pct:.2f}% ({old.worst_gpu}){note}")
    return not worse, line + (f" ({'; '.join(worse)})" if worse else "")


def _log_scores(result: PromotionResult) -> None:
    metrics = result.candidate.metrics("challenger")
    if result.current is not None:
        metrics |= result.current.metrics("champion")
    mlflow.log_metrics({k: v for k, v in metrics.items() if np.isfinite(v)})
    mlflow.log_metric("promoted", float(result.promoted))
    mlflow.set_tags({"tilecast.decision": "promoted" if result.promoted else "refused",
                     "tilecast.reason": "; ".join([result.reason])[:5000],
                     **{f"tilecast.candidate.{f}": v for f, v in result.candidate.versions.items()},
                     **({f"tilecast.champion.{f}": v for f, v in result.current.versions.items()}
                        if result.current else {})})
    mlflow.log_table(result.candidate.table, "e2e/challenger.json")
    if result.current is not None:
        mlflow.log_table(result.current.table, "e2e/champion.json")


def promote(families: Iterable[str] = FP32_FAMILIES, policy: PromotionPolicy | None = None,
            labels: LabelSet | None = None, experiment: str = "tilecast-promote", config_yaml: str | None = None,
            register: bool = True, trained: Mapping[str, tuple[str, KernelPredictor]] | None = None
            ) -> PromotionResult:
    """Evaluate ``@challenger`` against ``@champion`` for ``families`` and move ``@champion`` if it passes.

    ``trained``: family -> (version, predictor) of versions this process has just trained (the nightly's bootstrap):
    the suite uses those predictors as they are, where the version is the one being evaluated, instead of loading
    them back from the store (MLflow validated each when it was logged).

    Raises :class:`PromotionRefused` (champion untouched) when it does not pass or cannot be evaluated, and
    :class:`IncompatibleModelError` (nothing logged or moved) when a version to compare cannot be loaded.
    """
    families = tuple(dict.fromkeys(families))
    for fam in families:
        model_name(fam)  # unknown family -> error naming the known ones
    policy = policy or PromotionPolicy()
    client = MlflowClient()
    challengers = alias_versions(CHALLENGER, FAMILIES, client)
    champions = alias_versions(CHAMPION, FAMILIES, client)
    missing = [f for f in families if challengers[f] is None]
    if missing:
        raise PromotionRefused(f"no @{CHALLENGER} for {', '.join(missing)}: train one with "
                               f"`python jobs/train.py families=[{','.join(missing)}]`")
    # the end-to-end labels are fp32: the suite needs the fp32 families; a precision-path family takes part
    # once it has a version (its own gate is its kernel half)
    present = [f for f in FAMILIES if f in FP32_FAMILIES or f in families or challengers[f] or champions[f]]
    candidate = {f: (challengers[f] if f in families else champions[f] or challengers[f]) for f in present}
    unset = [f for f, v in candidate.items() if v is None]
    if unset:
        raise PromotionRefused(f"the end-to-end suite needs every fp32 family; {', '.join(unset)} has neither "
                               f"@{CHAMPION} nor @{CHALLENGER}: `python jobs/train.py families=[{','.join(unset)}]`")
    first = all(v is None for v in champions.values())
    current = None if first else {f: champions[f] or candidate[f] for f in present}
    in_memory = {f: predictor for f, (version, predictor) in (trained or {}).items() if candidate.get(f) == version}
    check_loadable({f: v for f, v in candidate.items() if f not in in_memory},
                   {f: CHALLENGER if f in families or champions[f] is None else CHAMPION for f in present})
    if current is not None:
        check_loadable(current, {f: CHAMPION if champions[f] else CHALLENGER for f in present})
    # the predictors are resolved once, here, and handed to the suite (plain code over in-memory predictors)
    cand_predictors = suite_predictors(candidate, in_memory)
    cur_predictors = None if current is None else suite_predictors(current, in_memory)
    labels = labels or shipped_labels()
    frames = build_frames(labels.labels)
    rows = unseen_kernel_rows(families, policy)
    commit = held("promotion")  # from the first alias move until the run is closed: a signal waits, then stops
    try:
        return _promote_run(families, policy, labels, frames, rows, (candidate, cand_predictors),
                            None if current is None else (current, cur_predictors), champions, first, client,
                            experiment, config_yaml, register, commit)
    finally:
        commit.release()


def _promote_run(families, policy, labels, frames, rows, cand, cur, champions, first, client, experiment,
                 config_yaml, register, commit: held) -> PromotionResult:
    """The MLflow run of :func:`promote`: score both sets (``(versions, predictors)`` each; ``cur`` None on a first
    promotion), decide, and (holding signals) move the aliases."""
    candidate = cand[0]
    with mlflow.start_run(experiment_id=ensure_experiment(experiment), run_name="promote") as run:
        log_lineage(config_yaml, job="promote", families=",".join(families))
        mlflow.log_params({"families": ",".join(families), "kernel_tolerance_pct": policy.kernel_tolerance_pct,
                           "e2e_tolerance_pct": policy.e2e_tolerance_pct, "unseen_gpus": ",".join(policy.unseen_gpus),
                           "logo_tolerance_pct": policy.logo_tolerance_pct,
                           "logo_worst_tolerance_pct": policy.logo_worst_tolerance_pct,
                           "require_logo": policy.require_logo,
                           "labels": len(labels.labels), "labels_source": labels.source})
        cand_score = score_suite(cand[0], labels.labels, rows, frames, cand[1])
        cur_score = None if cur is None else score_suite(cur[0], labels.labels, rows, frames, cur[1])
        crash_point("promote.scored")
        ok, reasons = decide(cur_score, cand_score, families, policy)
        result = PromotionResult(ok, "; ".join(reasons), first, families, cur_score, cand_score, [],
                                 run_id=run.info.run_id)
        _log_scores(result)
        if not ok:
            log.warning("promotion refused: %s", result.reason)
            raise PromotionRefused(f"not promoted: {result.reason}")
        metrics = cand_score.metrics("challenger") | (cur_score.metrics("champion") if cur_score else {})
        commit.hold()
        crash_point("promote.moving")
        for fam in families:
            if champions[fam] != candidate[fam]:
                result.moves.append(move_alias(model_name(fam), CHAMPION, candidate[fam], client=client,
                                               reason=f"promoted by jobs/promote.py (run {run.info.run_id}): "
                                                      f"{result.reason}", metrics=_family_metrics(metrics, fam)))
        crash_point("promote.moved")
        result.forecaster_version = sync_forecaster(
            register, reason=f"champion set after promotion run {run.info.run_id}",
            metrics={k: v for k, v in metrics.items() if "e2e" in k}, client=client)
        if result.forecaster_version:
            mlflow.set_tag("tilecast.forecaster_version", result.forecaster_version)
        crash_point("promote.synced")
    return result


def _family_metrics(metrics: Mapping[str, float], family: str) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if k.endswith(f".{family}") or "e2e" in k}


def sync_forecaster(register: bool = True, reason: str = "", metrics: Mapping[str, float] | None = None,
                    client: MlflowClient | None = None) -> str | None:
    """Point ``tilecast-forecaster@champion`` at the bundle of exactly the families' ``@champion`` versions.

    ``register``: log that bundle as a new forecaster version when none exists yet; otherwise an existing
    version is reused and, when none matches, a ``@champion`` that bundles other versions is removed
    (recorded) rather than left serving versions that are not the champions. Returns the version, or None.
    """
    client = client or MlflowClient()
    bundle = {f: v for f, v in alias_versions(CHAMPION, FAMILIES, client).items() if v is not None}
    if not bundle:
        return None
    if register:
        return register_forecaster(bundle, CHAMPION, reason=reason, metrics=metrics)
    version = find_forecaster(bundle, client)
    if version is not None:
        return register_forecaster(bundle, CHAMPION, reason=reason, metrics=metrics)  # reuses it: an alias move
    try:
        current = client.get_registered_model(FORECASTER_NAME).aliases.get(CHAMPION)
    except MlflowException:
        return None
    if current is not None:
        log.warning("%s@%s bundled other versions than the champions and register_forecaster is off: alias "
                    "removed (the next promote or rollback with register_forecaster=true registers the bundle)",
                    FORECASTER_NAME, CHAMPION)
        move_alias(FORECASTER_NAME, CHAMPION, None, client=client, metrics=dict(metrics or {}),
                   reason=f"{reason}: no forecaster version bundles the champions {bundle_of(bundle)}")
    return None


def rollback(families: Iterable[str] = FP32_FAMILIES, register: bool = True,
             experiment: str = "tilecast-promote") -> list[AliasMove]:
    """Undo the latest promotion of each family's ``@champion`` not undone yet (a move of its own, in an MLflow
    run of ``experiment``), and bring ``tilecast-forecaster@champion`` in step (see :func:`sync_forecaster`).

    A second rollback goes further back (v1 -> v2 -> v4, rollback: v2, rollback: v1), never undoes the first;
    with nothing older left for some family, :class:`PromotionRefused` and nothing moves.
    """
    families = tuple(dict.fromkeys(families))
    for fam in families:
        model_name(fam)  # unknown family -> error naming the known ones
    client = MlflowClient()
    plan: dict[str, AliasMove] = {}
    for fam in families:
        name = model_name(fam)
        try:
            history = alias_history(name, CHAMPION, client)
        except MlflowException:
            history = []
        if not history:
            raise PromotionRefused(f"{name} has no @{CHAMPION} history: nothing to roll back")
        target = rollback_target(history)
        if target is None or target.from_version is None:
            first = target.to_version if target is not None else history[0].to_version
            raise PromotionRefused(f"{name}@{CHAMPION}: nothing older to restore (v{first} was the first champion); "
                                   f"nothing rolled back")
        plan[fam] = target
    with held("rollback"), mlflow.start_run(experiment_id=ensure_experiment(experiment), run_name="rollback") as run:
        log_lineage(None, job="promote", families=",".join(families), action="rollback")
        moves = [move_alias(model_name(fam), CHAMPION, t.from_version, client=client, kind=ROLLBACK, undoes=t.key,
                            reason=f"rollback of move #{t.seq} ({t.describe()}) by jobs/promote.py rollback=true "
                                   f"(run {run.info.run_id})", metrics=dict(t.metrics)) for fam, t in plan.items()]
        mlflow.set_tags({f"tilecast.rollback.{m.model}": m.describe() for m in moves})
        version = sync_forecaster(register, reason=f"champion set after rollback run {run.info.run_id}",
                                  client=client)
        if version:
            mlflow.set_tag("tilecast.forecaster_version", version)
    return moves
