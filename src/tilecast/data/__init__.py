"""The measured data: ingest (source tree -> checked Parquet) and loaders.

Datasets: NeuSight (``tilecast.paths.NEUSIGHT_DIR``, the default of the NeuSight loaders),
NeuSight AMD (``NEUSIGHT_AMD_DIR``), AIConfigurator (``AICONFIGURATOR_DIR``), its serving-engine tables
(``AICONFIGURATOR_ENGINES_DIR``) and MoE-era tables (``AICONFIGURATOR_MOE_DIR``), Vidur (``VIDUR_DIR``) and
llm-foundry (``LLM_FOUNDRY_DIR``).
Every loader takes an optional ``root``.
"""

from tilecast.data.datasets import DATASETS
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
from tilecast.data.load_measured import (
    aiconfigurator_systems,
    amd_kernel_names,
    load_aiconfigurator,
    load_aiconfigurator_engines,
    load_aiconfigurator_moe,
    load_amd_devices,
    load_amd_kernels,
    load_llm_foundry,
    load_vidur,
)
from tilecast.data.tags import Tag, parse_tag

__all__ = ["DATASETS", "IngestReport", "Tag", "aiconfigurator_systems", "amd_kernel_names", "data_hash",
           "graph_tags", "kernel_names", "load_aiconfigurator", "load_aiconfigurator_engines",
           "load_aiconfigurator_moe", "load_amd_devices", "load_amd_kernels",
           "load_e2e_labels", "load_graph", "load_kernels", "load_llm_foundry", "load_node_labels", "load_paper",
           "load_vidur", "parse_tag", "run_ingest"]
