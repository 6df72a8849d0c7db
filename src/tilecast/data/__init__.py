"""The measured NeuSight data: ingest (source tree -> checked Parquet) and loaders.

Loaders read ``tilecast.paths.NEUSIGHT_DIR`` by default; each takes an optional ``root``.
"""

from tilecast.data.ingest import IngestReport, run_ingest
from tilecast.data.load import (
    data_hash,
    graph_tags,
    kernel_names,
    load_e2e_labels,
    load_graph,
    load_kernels,
    load_node_labels,
    load_paper,
)
from tilecast.data.tags import Tag, parse_tag

__all__ = ["IngestReport", "Tag", "data_hash", "graph_tags", "kernel_names", "load_e2e_labels", "load_graph",
           "load_kernels", "load_node_labels", "load_paper", "parse_tag", "run_ingest"]
