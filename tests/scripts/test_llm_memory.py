"""`schedtune llm-memory`: a bad --config or --measured file is one line on stderr, exit 1."""

from __future__ import annotations

import pytest

from scripts import llm_memory

BAD = {"list": b"[1, 2]", "deep": b"[" * 100_000, "type-list": b'{"model_type": ["llama"]}',
       "empty": b"", "latin1": b'{"model_type": "caf\xe9"}'}


@pytest.mark.parametrize("option", ["--config", "--measured"])
@pytest.mark.parametrize("content", list(BAD))
def test_a_bad_json_file_is_refused_in_one_line(tmp_path, capsys, option, content) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(BAD[content])
    assert llm_memory.main([option, str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("llm-memory: ") and len(err.strip().splitlines()) == 1
