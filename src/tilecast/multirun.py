"""The closing table of a sweep: ``python jobs/predict.py -m gpu=l4,tesla_t4,a100_sxm4_80gb ...`` ends with one
table of its runs (what each run set, GPU, latency, fit, cost), not only with one block per run.

A Hydra callback (``hydra.callbacks.summary`` in ``conf/predict.yaml``): it collects what each job returned (the
predict job returns its JSON record) and prints the table when the sweep ends; a run that failed is a row with its
error. Single runs print nothing more.
"""

from __future__ import annotations

from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

#: (header, record key, format) of the table's columns after the overrides
COLUMNS = (("model", "model", "{}"), ("gpu", "gpu", "{}"), ("dtype", "dtype", "{}"), ("mode", "mode", "{}"),
           ("step / TPOT ms", "latency_ms", "{:.3f}"), ("fits", "fits", "{}"),
           ("USD per 1M tokens", "usd_per_1m", "{:.3f}"))


def summary_row(record: dict[str, Any]) -> dict[str, Any]:
    """The table's values of one predict record (step time for a workload, TPOT for a serving configuration)."""
    serve = record.get("mode") == "serve"
    return {**record, "latency_ms": record.get("tpot_ms" if serve else "e2e_ms"),
            "usd_per_1m": record.get("usd_per_1m_output_tokens" if serve else "cost_per_1m_tokens_usd")}


def format_table(rows: list[tuple[list[str], dict[str, Any] | None, str]]) -> str:
    """``rows``: (overrides, record or None, error). A value that is absent (a cell that does not fit has no cost)
    shows as ``-``."""
    header = ["run", *(h for h, _, _ in COLUMNS)]
    common = set.intersection(*(set(o) for o, _, _ in rows)) if len(rows) > 1 else set()
    lines = []
    for overrides, record, error in rows:
        shown = " ".join(o for o in overrides if o not in common) or " ".join(overrides)  # what the sweep varied
        if record is None:
            lines.append([shown, f"failed: {error}"] + [""] * (len(COLUMNS) - 1))
            continue
        values = summary_row(record)
        lines.append([shown, *(fmt.format(values[k]) if values.get(k) is not None else "-"
                               for _, k, fmt in COLUMNS)])
    widths = [max(len(str(r[i])) for r in [header, *lines]) for i in range(len(header))]
    out = ["  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in [header, *lines]]
    return "\n".join([out[0], "  ".join("-" * w for w in widths), *out[1:]])


class SweepSummary(Callback):
    """Print :func:`format_table` of every run of a multirun when it ends."""

    def __init__(self) -> None:
        self.rows: list[tuple[list[str], dict[str, Any] | None, str]] = []

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        overrides = [o for o in (job_return.overrides or []) if not o.startswith("hydra.")]
        if job_return.status == JobStatus.COMPLETED and isinstance(job_return.return_value, dict):
            self.rows.append((overrides, job_return.return_value, ""))
        elif job_return.status == JobStatus.FAILED:
            self.rows.append((overrides, None, str(job_return._return_value)))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.rows:
            print(f"\n{len(self.rows)} runs:\n{format_table(self.rows)}")
