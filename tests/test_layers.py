"""Import-linter contracts (pyproject.toml): the estimator never imports the extender, and
torch never reaches the request path."""

from pathlib import Path

from importlinter.cli import lint_imports


def test_import_contracts_hold(monkeypatch) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    assert lint_imports(no_cache=True) == 0
