"""Which GPU types get a memory fit of their own: cards profiled on another software stack.

The reference rows (the SchedTune authors' cards) share one fit and one pad. A card whose
memory was profiled here (`schedtune profile`: another torch, CUDA and driver, a newer
architecture) and that the reference rows do not cover is fitted on its own rows, with its
own held-out pads: in one shared fit its rows moved the reference cards' predictions (with
the H200's 108 training rows, DenseNet-169 at batch 64 fell 13-16 % short on three
reference cards, one model out), and one shared pad widened every card's from 11.8 % to
27.8 %. Fitted alone, the H200 loses nothing (docs/2026-12-06-roofline-time.md).
"""

from __future__ import annotations

import pandas as pd

REFERENCE_SOURCES = ("measured", "reconstructed")
PROFILED = "profiled"
TARGETS = ("train-mem", "infer-mem")
#: Fewer profiled models leave the card's one-model-out pad uncalibrated: it stays in the
#: shared fit (as an unseen or seen type, as before).
MIN_MODELS = 10
#: Protocols that hold out models or families (a card's fit is judged on its own rows);
#: holding out a GPU type means the card is unseen, judged by the shared fit.
PROTOCOLS = ("lomo", "lofo", "random")


def own_fit_gpus(frame: pd.DataFrame) -> list[str]:
    """GPU types with profiled rows of at least `MIN_MODELS` models and no reference row."""
    reference = set(frame.loc[frame["source"].isin(REFERENCE_SOURCES), "gpu"])
    profiled = frame[frame["source"].eq(PROFILED) & ~frame["gpu"].isin(reference)]
    models = profiled.groupby("gpu")["model"].nunique()
    return sorted(str(gpu) for gpu in models[models >= MIN_MODELS].index)


def split(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """The shared fit's rows, and each own-fit card's rows (`own_fit_gpus`)."""
    cards = own_fit_gpus(frame)
    shared = frame[~frame["gpu"].isin(cards)].reset_index(drop=True)
    return shared, {gpu: frame[frame["gpu"] == gpu].reset_index(drop=True) for gpu in cards}
