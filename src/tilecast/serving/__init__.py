"""Serving engines as they run a model: vLLM, SGLang and TensorRT-LLM as plug-ins (scheduler policy, CPU
overheads per step, the engine's own kernels and all-reduce), the iteration-level simulation of one engine
replica under a benchmark client, its closed-form steady state, and disaggregated prefill / decode pools."""
