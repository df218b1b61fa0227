"""The test harness removes the Fast DDS segments its killed processes leave (test/support/shm.py), and only those."""

from __future__ import annotations

import fcntl
import os
import time

from support.shm import clean_stale


def _segment(folder, name, age, port=False):
    for path in (folder / name, folder / f"{name}_el"):
        path.write_bytes(b"\0" * 16)
        os.utime(path, (time.time() - age, time.time() - age))
    if port:
        (folder / f"sem.{name}_mutex").write_bytes(b"\0")


def test_a_segment_nobody_holds_goes_with_its_lock_and_semaphore(tmp_path):
    _segment(tmp_path, "fastdds_0123456789abcdef", age=3600)
    _segment(tmp_path, "fastdds_port7411", age=3600, port=True)
    assert clean_stale(tmp_path) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_segment_a_process_holds_or_just_made_stays(tmp_path):
    _segment(tmp_path, "fastdds_held", age=3600)
    _segment(tmp_path, "fastdds_young", age=5)
    (tmp_path / "other_file").write_bytes(b"x")
    holder = os.open(tmp_path / "fastdds_held_el", os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)  # as a running participant holds it
    try:
        assert clean_stale(tmp_path) == 0
    finally:
        os.close(holder)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["fastdds_held", "fastdds_held_el", "fastdds_young", "fastdds_young_el", "other_file"]
    assert clean_stale(tmp_path) == 1  # released: now stale
    assert clean_stale(tmp_path, now=time.time() + 3600) == 1  # the young one, an hour later


def test_a_link_is_never_followed(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    (target / "keep").write_bytes(b"x")
    _segment(tmp_path, "fastdds_real", age=3600)
    os.symlink(target / "keep", tmp_path / "fastdds_link_el")
    assert clean_stale(tmp_path) == 1
    assert (target / "keep").exists() and (tmp_path / "fastdds_link_el").is_symlink()
