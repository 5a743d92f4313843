"""`schedtune evaluate`: options that cannot work are usage errors (exit 2)."""

from __future__ import annotations

import pytest

from scripts import evaluate


@pytest.mark.parametrize("argv, words", [
    (["--jobs", "0"], "expected a positive integer, got '0'"),
    (["--parts", "--target", "train-time"], "memory targets only"),
])
def test_impossible_options_are_refused(capsys, argv, words) -> None:
    with pytest.raises(SystemExit) as exited:
        evaluate.main(argv)
    assert exited.value.code == 2
    assert words in capsys.readouterr().err
