import pytest

from estimator.catalogue import CATALOGUE, PAPER_GPUS_BY_CUDA_CORES, get_gpu, gpu_for_product
from estimator.errors import UnknownGPU


@pytest.mark.parametrize(("label", "name"), [
    ("NVIDIA-GeForce-RTX-3090", "RTX-3090"),
    ("Tesla-T4", "T4"),
    ("Tesla-T4-SHARED", "T4"),  # device-plugin time-slicing suffix
    ("NVIDIA-A100-SXM4-40GB", "A100-40GB"),
    ("NVIDIA-A100-80GB-PCIe", "A100-80GB"),
    ("NVIDIA-H100-80GB-HBM3", "H100-80GB"),
    ("NVIDIA-H200", "H200"),
    ("NVIDIA-L40S", "L40S"),
    ("NVIDIA GeForce RTX 2070 SUPER", "RTX-2070S"),  # nvidia-smi spelling
    ("nvidia-l4", "L4"),
])
def test_gfd_product_labels_map_to_types(label, name) -> None:
    assert gpu_for_product(label).name == name


@pytest.mark.parametrize("label", ["NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "NVIDIA-B300", "", "  "])
def test_unknown_products_are_not_guessed(label) -> None:
    assert gpu_for_product(label) is None
    with pytest.raises(UnknownGPU, match="catalogue"):
        get_gpu(label)


def test_catalogue_covers_table_one_and_todays_gpus() -> None:
    required = {"T4", "A10", "L4", "L40S", "A100-40GB", "A100-80GB", "H100-80GB", "H200"}
    assert required | set(PAPER_GPUS_BY_CUDA_CORES.values()) <= set(CATALOGUE)
    # Table I values, as in the authors' data.
    v100 = CATALOGUE["V100-16GB"]
    assert (v100.cuda_cores, v100.tensor_cores, v100.mem_bandwidth_gbs, v100.sm_count,
            v100.mem_clock_mhz) == (5120, 640, 900.0, 80, 1752)
    assert all(t.memory_mib > 0 and t.cuda_cores > 0 for t in CATALOGUE.values())
