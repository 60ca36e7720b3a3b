"""The open benchmark runs end to end on a small table and reports both ways of
building the view, with the same file count."""

from __future__ import annotations

from bench.open_bench import markdown, run


def test_open_bench_smoke() -> None:
    res = run(commits=12, files=3, repeat=1)
    assert res["with_checkpoint"]["files"] == res["full_replay"]["files"] == 36
    assert res["with_checkpoint"]["commits"] == 12
    text = markdown(res, "python -m bench open --commits 12")
    assert "files-index checkpoint" in text and "full replay" in text
