"""One interactive chart for the report's per-GPU views, the data embedded once (JSON) and drawn as SVG by a
small script: pick a view, a workload and a GPU family; a family holds at most :data:`MAX_SERIES` GPUs, so a
panel never shows more series than a person can tell apart.

Views (each a list of workloads, each workload a series per GPU):

- ``step time vs batch``: per (model, dtype, mode) of the headline slice, the step time of the cells that fit;
- ``cost vs step time``: the same cells, $ per 1M tokens against the step time (one point per batch);
- ``serving: tokens/s per GPU vs per user``: per serve workload (model, dtype, isl, osl), each GPU's Pareto
  front of its fitting (tp, concurrency) cells.

Numbers are rounded to 3 significant figures (what a chart can show); every value is in the CSV tables.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tilecast.planning.pareto import pareto_mask
from tilecast.reports.tables import Slice, fitting, headline
from tilecast.specs import get_gpu

#: GPUs a family (one panel) holds at most
MAX_SERIES = 8
#: architecture -> family shown in the chart's GPU selector
_OLD = "Pascal / Volta / Turing"
FAMILIES = {"pascal": _OLD, "volta": _OLD, "turing": _OLD,
            "ampere": "Ampere", "ada": "Ada", "hopper": "Hopper", "blackwell": "Blackwell", "cdna1": "AMD CDNA",
            "cdna2": "AMD CDNA", "cdna3": "AMD CDNA", "xe2": "Intel Xe2"}
CHART_ID = "explorer"


def gpu_families(gpus: Iterable[str]) -> dict[str, list[str]]:
    """Family name -> its GPUs (a family of more than :data:`MAX_SERIES` split into numbered parts)."""
    groups: dict[str, list[str]] = {}
    for g in sorted(set(gpus)):
        try:
            arch = get_gpu(g).architecture
        except KeyError:
            arch = "other"
        groups.setdefault(FAMILIES.get(arch, arch.title()), []).append(g)
    out = {}
    for name, members in sorted(groups.items()):
        parts = [members[i:i + MAX_SERIES] for i in range(0, len(members), MAX_SERIES)]
        for k, part in enumerate(parts):
            out[name if len(parts) == 1 else f"{name} ({k + 1})"] = part
    return out


def _r(values: np.ndarray) -> list:
    """3 significant figures, None for missing (JSON null)."""
    out = []
    for v in np.asarray(values, dtype=float):
        out.append(None if not np.isfinite(v) else float(f"{v:.3g}"))
    return out


@dataclass(frozen=True)
class View:
    name: str
    x: str
    y: str
    workloads: list[str]
    series: list[dict[str, list[list]]]  # per workload: GPU -> [xs, ys]
    line: bool = True  # join a series' points

    def to_dict(self) -> dict:
        return {"name": self.name, "x": self.x, "y": self.y, "workloads": self.workloads, "series": self.series,
                "line": self.line}


def _workload_label(m: pd.DataFrame) -> str:
    r = m.iloc[0]
    return f"{r['model']} {r['dtype']} {r['mode']} (seq {int(r['seq_len'])})"


def score_views(scores: pd.DataFrame, sl: Slice) -> list[View]:
    """The two views of the score table's headline slice."""
    sub = fitting(headline(scores, sl))
    if sub.empty:
        return []
    latency, cost, names = [], [], []
    for _, m in sub.groupby(["model", "dtype", "mode"], sort=True):
        names.append(_workload_label(m))
        lat, cst = {}, {}
        for gpu, g in m.groupby("gpu"):
            g = g.sort_values("batch")
            lat[gpu] = [_r(g["batch"]), _r(g["e2e_ms"])]
            cst[gpu] = [_r(g["e2e_ms"]), _r(g["cost_per_1m_tokens_usd"])]
        latency.append(lat)
        cost.append(cst)
    return [View("step time vs batch", "batch", "step ms", names, latency),
            View("cost vs step time", "step ms", "$ per 1M tokens", names, cost)]


def serve_view(serve: pd.DataFrame | None, workloads: Iterable[tuple[str, str, int, int]] | None = None
               ) -> list[View]:
    """Per serve workload (``workloads``: (model, dtype, isl, osl) to show, default all), each GPU's front of
    output tokens/s per GPU against per user (cells that fit)."""
    from tilecast.reports.serve import fitting_cells

    if serve is None or serve.empty:
        return []
    fit = fitting_cells(serve)
    if fit.empty:
        return []
    wanted = None if workloads is None else set(workloads)
    names, series = [], []
    for (model, dtype, isl, osl), w in fit.groupby(["model", "dtype", "isl", "osl"], sort=True):
        if wanted is not None and (model, dtype, int(isl), int(osl)) not in wanted:
            continue
        names.append(f"{model} {dtype} isl {int(isl)} / osl {int(osl)}")
        per = {}
        for gpu, g in w.groupby("gpu"):
            user = g["tokens_per_s_per_user"].to_numpy(dtype=float)
            per_gpu = g["tokens_per_s_per_gpu"].to_numpy(dtype=float)
            front = pareto_mask(1.0 / per_gpu, 1.0 / user)
            order = np.argsort(user[front])
            per[gpu] = [_r(user[front][order]), _r(per_gpu[front][order])]
        series.append(per)
    if not names:
        return []
    return [View("serving: tokens/s per GPU vs per user", "output tokens/s per user", "output tokens/s per GPU",
                 names, series)]


def chart_payload(views: list[View]) -> dict | None:
    if not views:
        return None
    gpus = sorted({g for v in views for s in v.series for g in s})
    return {"views": [v.to_dict() for v in views], "families": gpu_families(gpus)}


_SCRIPT = r"""
(() => {
  const root = document.getElementById('__ID__');
  const data = JSON.parse(document.getElementById('__ID__-data').textContent);
  const colours = ['#1f77b4','#ff7f0e','#2ca02c','#d62728','#9467bd','#8c564b','#e377c2','#17becf'];
  const sel = (label, options) => {
    const wrap = document.createElement('label'); wrap.textContent = label + ' ';
    const s = document.createElement('select');
    options.forEach((o, i) => { const e = document.createElement('option'); e.value = i; e.textContent = o;
                                s.appendChild(e); });
    wrap.appendChild(s); root.querySelector('.controls').appendChild(wrap); return s;
  };
  const view = sel('view', data.views.map(v => v.name));
  const work = sel('workload', []);
  const fams = Object.keys(data.families);
  const fam = sel('GPUs', fams);
  const svgNS = 'http://www.w3.org/2000/svg';
  const el = (name, attrs, text) => { const e = document.createElementNS(svgNS, name);
    Object.entries(attrs).forEach(([k, v]) => e.setAttribute(k, v)); if (text !== undefined) e.textContent = text;
    return e; };
  const fill = () => { const v = data.views[view.value]; work.innerHTML = '';
    v.workloads.forEach((w, i) => { const e = document.createElement('option'); e.value = i; e.textContent = w;
                                     work.appendChild(e); }); };
  const ticks = (lo, hi) => { const out = []; for (let p = Math.floor(Math.log10(lo)); p <= Math.ceil(Math.log10(hi));
    p++) { [1, 2, 5].forEach(m => { const t = m * Math.pow(10, p); if (t >= lo && t <= hi) out.push(t); }); }
    return out; };
  const label = t => t >= 1e6 ? (t / 1e6) + 'M' : t >= 1e3 ? (t / 1e3) + 'k' : String(+t.toPrecision(3));
  const draw = () => {
    const v = data.views[view.value], series = v.series[work.value] || {}, members = data.families[fams[fam.value]];
    const svg = root.querySelector('svg'); while (svg.firstChild) svg.removeChild(svg.firstChild);
    const W = 760, H = 380, L = 70, R = 190, T = 15, B = 45;
    const shown = members.filter(g => series[g]);
    let xs = [], ys = [];
    shown.forEach(g => { series[g][0].forEach((x, i) => { const y = series[g][1][i];
      if (x > 0 && y > 0) { xs.push(x); ys.push(y); } }); });
    if (!xs.length) { svg.appendChild(el('text', {x: 20, y: 40}, 'no GPU of this family has a cell here'));
                      return; }
    const lx = [Math.min(...xs) / 1.2, Math.max(...xs) * 1.2], ly = [Math.min(...ys) / 1.2, Math.max(...ys) * 1.2];
    const px = x => L + (W - L - R) * (Math.log(x) - Math.log(lx[0])) / (Math.log(lx[1]) - Math.log(lx[0]));
    const py = y => H - B - (H - T - B) * (Math.log(y) - Math.log(ly[0])) / (Math.log(ly[1]) - Math.log(ly[0]));
    svg.appendChild(el('rect', {x: L, y: T, width: W - L - R, height: H - T - B, fill: 'none', stroke: '#999'}));
    ticks(...lx).forEach(t => { svg.appendChild(el('line', {x1: px(t), x2: px(t), y1: T, y2: H - B,
      stroke: '#eee'})); svg.appendChild(el('text', {x: px(t), y: H - B + 14, 'font-size': 10,
      'text-anchor': 'middle'}, label(t))); });
    ticks(...ly).forEach(t => { svg.appendChild(el('line', {x1: L, x2: W - R, y1: py(t), y2: py(t),
      stroke: '#eee'})); svg.appendChild(el('text', {x: L - 4, y: py(t) + 3, 'font-size': 10,
      'text-anchor': 'end'}, label(t))); });
    svg.appendChild(el('text', {x: (L + W - R) / 2, y: H - 8, 'font-size': 11, 'text-anchor': 'middle'}, v.x));
    svg.appendChild(el('text', {x: 14, y: (T + H - B) / 2, 'font-size': 11, 'text-anchor': 'middle',
      transform: `rotate(-90 14 ${(T + H - B) / 2})`}, v.y));
    shown.forEach((g, k) => {
      const c = colours[k % colours.length], pts = [];
      series[g][0].forEach((x, i) => { const y = series[g][1][i]; if (x > 0 && y > 0) pts.push([px(x), py(y)]); });
      if (v.line && pts.length > 1) svg.appendChild(el('polyline', {points: pts.map(p => p.join(',')).join(' '),
        fill: 'none', stroke: c, 'stroke-width': 1.5}));
      pts.forEach(p => svg.appendChild(el('circle', {cx: p[0], cy: p[1], r: 2.5, fill: c})));
      svg.appendChild(el('rect', {x: W - R + 12, y: T + 4 + 16 * k, width: 10, height: 10, fill: c}));
      svg.appendChild(el('text', {x: W - R + 27, y: T + 13 + 16 * k, 'font-size': 11}, g));
    });
  };
  view.addEventListener('change', () => { fill(); draw(); });
  work.addEventListener('change', draw); fam.addEventListener('change', draw);
  fill(); draw();
})();
"""


def chart_html(payload: dict, ident: str = CHART_ID) -> str:
    """The chart: controls, an SVG, the data once as JSON, and the script that draws it."""
    data = json.dumps(payload, separators=(",", ":")).replace("</", "<\\/")
    return (f"<div id='{ident}' class='chart'><div class='controls'></div>"
            f"<svg viewBox='0 0 760 380' width='760' height='380' role='img'></svg></div>\n"
            f"<script type='application/json' id='{ident}-data'>{data}</script>\n"
            f"<script>{_SCRIPT.replace('__ID__', ident)}</script>")


__all__ = ["CHART_ID", "FAMILIES", "MAX_SERIES", "View", "chart_html", "chart_payload", "gpu_families",
           "score_views", "serve_view"]
