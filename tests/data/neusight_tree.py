"""A miniature NeuSight source tree: real headers, a few real rows of every kind (no ../shared needed)."""

from __future__ import annotations

import json
from pathlib import Path

KERNEL_HEAD = ("OPName,Latency,Device,Torch Version,CUDNN Version,Kernel Name,Warps per SM,Blocks per SM,"
               "Grid x,Grid y,Grid z,Block x,Block y,Block z,CUDA Version")
GEMM_HEAD = KERNEL_HEAD + ",Kernels,B,M,N,K"
VEC_HEAD = KERNEL_HEAD + ",B,H"
VEC_LARGE_HEAD = KERNEL_HEAD + ",B,H,large"
ADD_KERNEL = ('"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, '
              'at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)"')

FILES: dict[str, str] = {
    "LICENSE": "MIT License\n\nCopyright (c) 2025 Georgia Institute of Technology and Microsoft Corporation\n\n"
               "Permission is hereby granted, free of charge, ...\n",
    # two GPUs of bmm, written in an order that the Device sort must fix
    "kernels/train/bmm/Tesla T4.csv": "\n".join([
        GEMM_HEAD,
        "bmm,0.035466667264699936,Tesla T4,p2.1.0,8902,volta_sgemm_64x64_nn,0.65,0.325,1,1,13,64,1,1,cu121,"
        ";volta_sgemm_64x64_nn,13,27,15,29",
        "bmm,0.03447466716170311,Tesla T4,p2.1.0,8902,volta_sgemm_64x64_nn,1.1,0.55,1,1,22,64,1,1,cu121,"
        ";volta_sgemm_64x64_nn,22,18,10,14",
    ]) + "\n",
    "kernels/train/bmm/NVIDIA A100-PCIE-40GB.csv": "\r\n".join([
        GEMM_HEAD,
        "bmm,0.03578666721781095,NVIDIA A100-PCIE-40GB,p2.1.0,8902,ampere_sgemm_128x128_nn,1.7777778,"
        "0.22222222,4,1,6,256,1,1,cu121,;ampere_sgemm_128x128_nn,6,27,21,390",
    ]) + "\r\n",
    "kernels/train/add/Tesla P4.csv": "\n".join([
        VEC_HEAD,
        f"add,0.0261824,Tesla P4,p2.1.0,8902,{ADD_KERNEL},2.6,0.65,1,1,1,128,1,1,cu121,127,168",
    ]) + "\n",
    "kernels/test/linear.csv": "\n".join([
        GEMM_HEAD,
        "linear,1.1338346401850383,NVIDIA L4,p2.1.0,8902,ampere_sgemm_128x64_tn,66.206894,16.551723,20,16,3,"
        "128,1,1,cu121,;ampere_sgemm_128x64_tn,1,1024,2560,2560",
        "linear,26.540971120198567,NVIDIA A100 80GB PCIe,p2.1.0,8902,ampere_sgemm_128x128_tn,847.4483,"
        "105.93104,8,256,3,256,1,1,cu121,,1,32768,4096,1024",
    ]) + "\n",
    "kernels/train_processed/elem.csv": "\n".join([
        VEC_LARGE_HEAD,
        f"add,0.2981696009635925,Tesla P100-PCIE-16GB,p2.1.0,8902,{ADD_KERNEL},1787.5,446.875,25025,1,1,128,1,1,"
        "cu121,13021,984,True",
        f"add,0.02,Tesla P100-PCIE-16GB,p2.1.0,8902,{ADD_KERNEL},1.5,0.4,25,1,1,128,1,1,cu121,13,98,False",
    ]) + "\n",
    "kernels/dims/train_bmm.csv": "8;2;18;16\n15;9;7;6\n",
    "kernels/dims/test_cnn.csv": "4;64;64;3;56;1;1\n4;1024;256;1;14;1;0",
    "labels/NVIDIA_L4/bert_large-inf-512-8.json": json.dumps(
        {"num_layer": 24, "e2e_latency": 330.5, "fw_latency": 330.5, "bwall_latency": 0}, indent=4),
    "labels/NVIDIA_L4/switch4-inf-512-1.json": json.dumps(
        {"num_layer": 0, "e2e_latency": 50.59174346923828, "fw_latency": 50.59174346923828,
         "bwall_latency": 0.0}, indent=4),
    "labels/NVIDIA_A100-PCIE-40GB/switchxl4-inf-2048-1.json": json.dumps(
        {"num_layer": None, "e2e_latency": 120.0, "fw_latency": 120.0, "bwall_latency": 0}, indent=4),
    "labels/NVIDIA_A100-SXM4-40GB/gpt2_large-train-1024-4-pp4_1.json": json.dumps(
        {"num_layer": 0, "e2e_latency": 1597.6410034179687, "fw_latency": 0, "bwall_latency": 0}, indent=4),
    "labels/NVIDIA_L4/bert_large-inf-512-8.csv": "\n".join([
        "op,target,_input_nodes,_args,_kwargs,users,type,_prev,_next,_erased,_repr_fn,meta,input_shapes,"
        "input_contiguous,contiguous,latency,fw_latency,bw_latency,acc_latency,output_shape,dtype,Name",
        "placeholder,input_ids,{},(),{},\"{size: None}\",<class 'torch.Tensor'>,,size,False,,{},[],[],True,"
        "0.0,0.0,0.0,0.0,\"(8, 512)\",torch.int64,input_ids",
        "call_method,size,{input_ids: None},\"(input_ids,)\",{},{getitem: None},,input_ids,getitem,False,,{},"
        "\"[[8, 512]]\",[True],True,0.01228800043463707,0.01228800043463707,0.0,0.0,\"(1,)\",,size",
    ]) + "\n",
    "labels/NVIDIA_L4/switch4-inf-512-1.csv": "\n".join([
        "op,target,_input_nodes,_args,_kwargs,users,type,_prev,_next,_erased,_repr_fn,meta,input_shapes,"
        "input_contiguous,contiguous,e2e_latency,fw_latency,bwall_latency,bw_latency,acc_latency,output_shape,"
        "dtype,Name",
        "placeholder,input_ids,{},(),{},{},<class 'torch.Tensor'>,,size,False,,{},[],[],True,0.5,0.5,0.0,0,0.0,"
        "\"(1, 512)\",torch.int64,input_ids",
    ]) + "\n",
    "graphs/bert_large-inf-512-8.csv": "\n".join([
        "Name,OpName,FwOps,BwOps,AccOps,Prev,Next,InputShapes,OutputShape",
        "input_ids,misc,[],[],[],set(),\"{'size', 'getattr_1'}\",[],\"(8, 512)\"",
        "size,misc,[],[],[],{'input_ids'},\"{'getitem', 'getitem_1'}\",\"[(8, 512)]\",\"(1,)\"",
        "getitem,getitem,\"[['MEM', ((1,), (1,))]]\",[],[],{'size'},\"{'expand', 'ones'}\",\"[(1,)]\",\"(1,)\"",
    ]) + "\n",
    "graphs/gpt3_xl-train-2048-4-pp4_4.csv": "\n".join([
        "Name,OpName,FwOps,BwOps,AccOps,Prev,Next,InputShapes,OutputShape",
        "input_ids,misc,[],[],[],set(),{'size'},[],\"(4, 2048)\"",
    ]) + "\n",
    "paper/nvidia_inf.csv": "\n".join([
        "NVIDIA_A100-PCIE-40GB",
        "Model,BERT-Large,,SwitchTrans,",
        "Batch,8,16,1,2",
        "Roofline,31.2,29.7,50.7,40.2",
        "NeuSight,23.4,13.2,6.3,",
        "",
        "Tesla_P4",
        "Model,BERT-Large,,SwitchTrans,",
        "Batch,8,16,1,2",
        "NeuSight,11.3,,,",
    ]) + "\n",
    "paper/perop.csv": "\n".join([
        ",In Distribution,,Out of Distribution,",
        ",BMM,LN,BMM,LN",
        "Roofline,55.36,54.97,44.18,58.06,",
        "NeuSight,25.96,20.05,13.78,56.69,",
    ]) + "\n",
    "devices/NVIDIA_L4.json": "{}\n",  # present in the real source, read by no table
}

#: output tables the fixture yields (relative names without .parquet).
FIXTURE_TABLES = [
    "kernels/train/add", "kernels/train/bmm", "kernels/train_processed/elem", "kernels/test/linear",
    "kernels/dims/test_cnn", "kernels/dims/train_bmm", "labels/e2e", "labels/nodes", "graphs/graphs",
    "paper/nvidia_inf", "paper/perop",
]


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write ``files`` (relative path -> text, written byte for byte) under ``root``."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode())
    return root
