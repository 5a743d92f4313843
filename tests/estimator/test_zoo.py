import sys

import pytest

from estimator import zoo


def test_registry_has_paper_models_and_a_spread_of_others() -> None:
    assert set(zoo.PAPER_MODELS) <= set(zoo.MODEL_NAMES)
    families = {spec.family for spec in zoo.REGISTRY.values()}
    assert {"resnext", "wide_resnet", "mobilenet", "efficientnet", "vit", "bert"} <= families


def test_unknown_model_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="resnet18"):
        zoo.get_spec("resnet9000")


def test_torchvision_models_load_without_running_torchvision_init() -> None:
    # A plain `import torchvision` fails on this CPU torch; the shim must not.
    model = zoo.get_spec("resnet18").build()
    assert sum(p.numel() for p in model.parameters()) == 11_689_512
    assert "torchvision.models.resnet" in sys.modules
    assert not hasattr(sys.modules["torchvision"], "set_image_backend")  # __init__ skipped


def test_bert_encoder_runs_a_forward_pass() -> None:
    import torch

    model = zoo.get_spec("bert_small").build().eval()
    with torch.no_grad():
        out = model(torch.randint(0, zoo.TEXT_VOCAB, (2, zoo.TEXT_SEQ_LEN)))
    assert tuple(out.shape) == (2, 2)
