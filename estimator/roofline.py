"""Run time from the hardware: each class of operation bounded by the GPU's compute or its
memory bandwidth, with efficiencies learned per (class, GPU architecture).

A step's operations (`estimator.simulation.op_costs`, columns ``op_*`` of the feature table)
take on GPU type g of architecture a

    gpu(g)  = max(F_conv / (P_conv(g) e_a), B_conv / (BW(g) m_a))
            + max(F_mm / (P_mm(g) e_a), B_mm / (BW(g) m_a))
            + B_other / (BW(g) m_a)
    step(g) = gpu(g) + K kappa

where P_conv is the TF32 tensor-core rate on Ampere and later (cuDNN's default in
PyTorch) else FP32, P_mm the FP32 rate (cuBLAS without TF32: PyTorch's default since 1.12),
BW the memory bandwidth (data sheets: `THROUGHPUT`), K the kernels the step launches and
kappa what each costs beyond its work: its launch, the tail of its last wave and the
host's dispatch, which eager PyTorch does not hide at these sizes. (Fitted on the authors'
rows with the host's time overlapping the GPU's as well, the overlapping part fits to
nothing.) Convolutions on CUDA cores may beat their counted FLOPs (Winograd,
`WINOGRAD_GAIN`); GEMMs never beat their peak.

A training epoch is `steps` steps. Where the rows carry an input pipeline (the authors'
CIFAR-10 loader, resizing every image on the CPU), an epoch takes at least
`steps x b + samples x h` (a smooth maximum: the loader overlaps the GPU): a property of
the job's input and its node's CPUs, not of the GPU, so rows profiled on synthetic input
(ours) have none.

The efficiencies e_a (compute) and m_a (memory) are learned in log space as the pooled
value plus a per-architecture deviation shrunk towards 0 (ridge); an architecture absent
from fitting gets the pooled value. Like Habitat (Yu et al., USENIX ATC 2021), the
prediction scales each operation by the target GPU's own peak rates rather than
regressing on GPU descriptors; unlike it, nothing is measured on the target GPU.

Numpy only (the service prices with it); the fit is
`estimator.fitting.regressors.RooflineRegressor`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from estimator.catalogue import CATALOGUE


@dataclass(frozen=True)
class Throughput:
    """Dense peak rates from NVIDIA's data sheets and architecture whitepapers (TFLOP/s):
    FP32 on CUDA cores, and TF32 on tensor cores (0: none, before Ampere)."""

    architecture: str
    fp32_tflops: float
    tf32_tflops: float


#: Per catalogue type (a test checks every type has one). GeForce Ampere and Ada run TF32
#: at their FP32 rate; K80: one of the board's two GPUs (2496 cores x 2 x 875 MHz).
THROUGHPUT: dict[str, Throughput] = {
    "K80": Throughput("kepler", 4.37, 0.0),
    "RTX-2070S": Throughput("turing", 9.06, 0.0),
    "RTX-3070": Throughput("ampere", 20.3, 20.3),
    "V100-16GB": Throughput("volta", 15.7, 0.0),
    "RTX-3090": Throughput("ampere", 35.6, 35.6),
    "T4": Throughput("turing", 8.1, 0.0),
    "V100-32GB": Throughput("volta", 15.7, 0.0),
    "A10": Throughput("ampere", 31.2, 62.5),
    "L4": Throughput("ada", 30.3, 60.0),
    "A40": Throughput("ampere", 37.4, 74.8),
    "RTX-A6000": Throughput("ampere", 38.7, 77.4),
    "RTX-4090": Throughput("ada", 82.6, 82.6),
    "L40S": Throughput("ada", 91.6, 183.0),
    "A100-40GB": Throughput("ampere", 19.5, 156.0),
    "A100-80GB": Throughput("ampere", 19.5, 156.0),
    "H100-PCIe": Throughput("hopper", 51.2, 378.0),
    "H100-80GB": Throughput("hopper", 67.0, 494.7),
    "H200": Throughput("hopper", 67.0, 494.7),
}
ARCHITECTURES = tuple(dict.fromkeys(t.architecture for t in THROUGHPUT.values()))

#: Columns a `RooflineRegressor` reads, in this order.
COLUMNS = ("op_conv_gflops", "op_mm_gflops", "op_conv_gb", "op_mm_gb", "op_other_gb",
           "op_kernels", "steps", "samples", "input_pipeline", "conv_tflops", "mm_tflops",
           "mem_bandwidth_gbs", "architecture_code", "unit_s")
SMOOTHNESS = 3.0
#: Samples in a training epoch: CIFAR-10's training images, the unit the time targets use.
EPOCH_SAMPLES = 50_000
#: What element-wise kernels reach of the data sheet's bandwidth (STREAM-like copies reach
#: 80-90 %; PyTorch's normalisation and activation kernels somewhat less): the pooled memory
#: efficiency is held near it, because on convolutional networks alone compute and memory
#: time grow together with the batch and the fit cannot tell them apart.
MEMORY_PRIOR = 0.75
#: FP32 3x3 convolutions run as Winograd transforms on cuDNN where it is faster, F(2x2, 3x3)
#: doing 2.25x fewer multiplications than the direct convolution whose FLOPs are counted:
#: the compute efficiency is a share of 2.25x the peak.
WINOGRAD_GAIN = 2.25


def step_columns(batch, train: bool) -> dict:  # noqa: ANN001  (a float or an array)
    """`steps` and `samples` of one unit: an epoch of `EPOCH_SAMPLES` at `batch`, or one
    forward pass of `batch` (a request)."""
    if train:
        return {"steps": np.ceil(EPOCH_SAMPLES / np.asarray(batch, float)),
                "samples": float(EPOCH_SAMPLES)}
    return {"steps": 1.0, "samples": batch}


def gpu_columns(gpu: str) -> dict[str, float]:
    """The GPU columns of `COLUMNS` for a catalogue type."""
    rates = THROUGHPUT[gpu]
    return {"conv_tflops": rates.tf32_tflops or rates.fp32_tflops, "mm_tflops": rates.fp32_tflops,
            "mem_bandwidth_gbs": CATALOGUE[gpu].mem_bandwidth_gbs,
            "architecture_code": float(ARCHITECTURES.index(rates.architecture))}


def efficiency(z: np.ndarray) -> np.ndarray:
    """A share of the peak in (0, 1): exp(-softplus(-z))."""
    return np.exp(-np.logaddexp(0.0, -z))


def logit(share: float) -> float:
    return float(np.log(share / (1.0 - share)))


def smoothmax(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a**SMOOTHNESS + b**SMOOTHNESS) ** (1.0 / SMOOTHNESS)


def efficiencies(pooled: np.ndarray, deviation: np.ndarray) -> dict[str, float]:
    """Named figures of one architecture (`deviation` zeros: the pooled ones)."""
    e, m = efficiency(pooled[:2] + deviation) * [WINOGRAD_GAIN, 1.0]
    per_kernel, per_batch, per_sample = np.exp(pooled[2:5])
    return {"compute_efficiency": float(e), "memory_efficiency": float(m),
            "kernel_s": float(per_kernel), "input_s_per_batch": float(per_batch),
            "input_s_per_sample": float(per_sample)}


def unit_time(X: np.ndarray, pooled: np.ndarray, deviation: dict[int, np.ndarray]) -> np.ndarray:
    """Each row's time in its unit (`COLUMNS`), for the learned parameters: `pooled` (z_e,
    z_m, log kappa, log b, log h) and per architecture code (delta z_e, delta z_m)."""
    X = np.asarray(X, dtype=float)
    (conv_f, mm_f, conv_b, mm_b, other_b, kernels, steps, samples, pipeline, conv_p, mm_p,
     bandwidth, arch, unit_s) = X.T
    shift = np.array([deviation.get(int(a), np.zeros(2)) for a in arch]).reshape(len(X), 2)
    e = WINOGRAD_GAIN * efficiency(pooled[0] + shift[:, 0])
    m = efficiency(pooled[1] + shift[:, 1])
    per_kernel, per_batch, per_sample = np.exp(pooled[2:5])
    memory = bandwidth * m  # GB/s
    # Winograd only for convolutions on CUDA cores; tensor-core convolutions and matrix
    # products are GEMMs, never above their peak.
    gemm = np.minimum(e, 1.0)
    conv_e = np.where(conv_p > mm_p, gemm, e)
    gpu = (np.maximum(conv_f / (conv_p * 1e3 * conv_e), conv_b / memory)
           + np.maximum(mm_f / (mm_p * 1e3 * gemm), mm_b / memory) + other_b / memory)
    total = steps * (gpu + kernels * per_kernel)
    loader = steps * per_batch + samples * per_sample
    return np.where(pipeline > 0, smoothmax(total, loader), total) / unit_s
