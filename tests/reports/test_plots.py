"""Plots: the Pareto front (property-checked), the plans' small multiples and the interactive chart's data."""

import json

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tilecast.planning.pareto import pareto_mask
from tilecast.reports.explorer import MAX_SERIES, chart_html, chart_payload, gpu_families, score_views, serve_view
from tilecast.reports.tables import Slice
from tilecast.specs import all_gpus

points = st.lists(st.tuples(st.floats(0.01, 100), st.floats(0.01, 100)), min_size=1, max_size=40)


@given(points)
def test_front_is_exactly_the_undominated_points(pts):
    cost, lat = np.array([p[0] for p in pts]), np.array([p[1] for p in pts])
    on = pareto_mask(cost, lat)
    for i in range(len(pts)):
        dominated = np.any((cost <= cost[i]) & (lat <= lat[i]) & ((cost < cost[i]) | (lat < lat[i])))
        if on[i]:
            assert not dominated
        elif not dominated:  # an exact duplicate of a front point: only the first of them is on the front
            assert any(cost[j] == cost[i] and lat[j] == lat[i] for j in np.flatnonzero(on))
    front = np.flatnonzero(on)
    order = front[np.argsort(cost[front])]
    assert np.all(np.diff(lat[order]) < 0)  # along the front, cheaper means slower
    assert not pareto_mask(np.array([np.nan, 1.0]), np.array([1.0, np.inf])).any()


def test_gpu_families_hold_at_most_eight_gpus():
    families = gpu_families(all_gpus())
    assert all(0 < len(m) <= MAX_SERIES for m in families.values())
    assert sorted(g for m in families.values() for g in m) == sorted(all_gpus())
    assert "Hopper" in families and set(families["Hopper"]) == {"h100_pcie", "h100_sxm_80gb", "h200_sxm"}


def test_chart_payload_of_a_real_run(smoke_scores, serve_scores):
    views = score_views(smoke_scores, Slice(seq_len=512)) + serve_view(serve_scores)
    assert [v.name for v in views] == ["step time vs batch", "cost vs step time",
                                       "serving: tokens/s per GPU vs per user"]
    payload = chart_payload(views)
    steps = views[0]
    cell = smoke_scores.loc[(smoke_scores["model"] == "gpt2_large") & (smoke_scores["dtype"] == "fp32")
                            & (smoke_scores["mode"] == "inference") & ~smoke_scores["fused"]
                            & (smoke_scores["parallel"] == "none") & (smoke_scores["gpu"] == "l4")
                            & (smoke_scores["batch"] == 8)].iloc[0]
    w = steps.workloads.index("gpt2_large fp32 inference (seq 512)")
    xs, ys = steps.series[w]["l4"]
    assert ys[xs.index(8)] == float(f"{cell['e2e_ms']:.3g}")  # 3 significant figures of the table's value
    page = chart_html(payload)
    assert page.count("application/json") == 1 and page.count('"views"') == 1  # the data once
    embedded = page.split("application/json' id='explorer-data'>")[1].split("</script>")[0]
    assert json.loads(embedded) == json.loads(json.dumps(payload))
    assert serve_view(serve_scores.assign(fits=False)) == [] and chart_payload([]) is None
