"""`python -m examples.generate`: the shipped example streams are what the generator builds, and
asking it for help does not rewrite them (it used to ignore its arguments and write every file)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from examples import generate


def test_the_shipped_examples_are_what_the_generator_builds() -> None:
    for name, build in generate.EXAMPLES.items():
        shipped = (generate.HERE / name).read_bytes()
        assert shipped == b"".join(orjson.dumps(e) + b"\n" for e in build()), f"examples/{name} is stale"


def test_help_prints_usage_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        generate.main(["--help", "--out", str(tmp_path)])
    assert exit_info.value.code == 0
    assert "usage:" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_it_writes_every_example_into_the_chosen_directory(tmp_path: Path) -> None:
    generate.main(["--out", str(tmp_path)])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(generate.EXAMPLES)
    for name in generate.EXAMPLES:
        assert (tmp_path / name).read_bytes() == (generate.HERE / name).read_bytes()


def test_check_fails_on_a_stale_file_and_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    generate.main(["--out", str(tmp_path)])
    assert generate.main(["--check", "--out", str(tmp_path)]) == 0
    (tmp_path / "fragmentation.jsonl").write_bytes(b"{}\n")
    assert generate.main(["--check", "--out", str(tmp_path)]) == 1
    assert "fragmentation.jsonl" in capsys.readouterr().err
