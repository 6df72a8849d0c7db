"""Plots: the Pareto front (property-checked) and the PNG files of a real score table."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tilecast.reports.plots import cost_latency_pareto, latency_vs_batch, pareto_front
from tilecast.reports.tables import Slice

points = st.lists(st.tuples(st.floats(0.01, 100), st.floats(0.01, 100)), min_size=1, max_size=40)


@given(points)
def test_front_is_exactly_the_undominated_points(pts):
    cost, lat = np.array([p[0] for p in pts]), np.array([p[1] for p in pts])
    front = pareto_front(cost, lat)
    on = np.zeros(len(pts), dtype=bool)
    on[front] = True
    for i in range(len(pts)):
        dominated = np.any((cost <= cost[i]) & (lat <= lat[i]) & ((cost < cost[i]) | (lat < lat[i])))
        if on[i]:
            assert not dominated
        elif not dominated:  # an exact duplicate of a front point
            assert any(cost[j] == cost[i] and lat[j] == lat[i] for j in front)
    assert np.all(np.diff(lat[front]) >= 0) and np.all(np.diff(cost[front]) < 0)


def test_pngs(tmp_path, smoke_scores):
    sl = Slice(seq_len=512)
    for fn in (latency_vs_batch, cost_latency_pareto):
        out = fn(smoke_scores, "inference", sl, tmp_path / f"{fn.__name__}.png")
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert latency_vs_batch(smoke_scores.assign(fits=False), "inference", sl, tmp_path / "none.png") is None
