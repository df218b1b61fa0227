"""Nothing a tool writes below the output folder the user named lands where a planted link points
(vision_factory/files.py's output_folder): a camera's OUT/NAME/, a deeper OUT/RIG/NAME/, verify's OUT/node/, quantize's
NAME_quantize/; and an output under a file is a one-line refusal, not a traceback.

Real links in tmp_path, real models (the shared shapes detector), real bags, the real command line (Click's runner,
or a child process); each case checks that the link's target is still empty (or holds what it held) afterwards.
"""

from __future__ import annotations

import os

import cv2
import numpy as np
import pytest
from click.testing import CliRunner
from support.cli import run_cli
from support.models import SHAPES_MODEL

from vision_factory.cli import main
from vision_factory.tools.bags import write_image_bag

KEPT = b"a file outside the output that no tool may remove or change\n"


def invoke(*arguments: object):
    return CliRunner().invoke(main, [str(argument) for argument in arguments])


def assert_refused(result, *words: str) -> None:
    """exit != 0, one line of error naming each of ``words``, no traceback."""
    assert result.exit_code != 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.output
    for word in words:
        assert word in errors[0], result.output


def assert_refused_by_process(done, *words: str) -> None:
    """assert_refused for a command run as a child process (support.cli.run_cli)."""
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, done.stderr
    for word in words:
        assert word in errors[0], done.stderr


def planted(out, below: str, tmp_path, name: str = "target"):
    """A link at OUT/``below`` to a folder outside OUT (made, empty), which no write may reach."""
    target = tmp_path / name
    target.mkdir()
    link = out / below
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target, target_is_directory=True)
    return target


# --- the helper ------------------------------------------------------------------------------------------


def test_output_folder_makes_each_component_and_returns_the_folder(tmp_path):
    from vision_factory.files import check_folder, output_folder

    assert check_folder(tmp_path / "out", "rig/front") == tmp_path / "out" / "rig" / "front"
    assert not (tmp_path / "out").exists()  # check_folder makes nothing
    assert output_folder(tmp_path / "out", "rig/front") == tmp_path / "out" / "rig" / "front"
    assert (tmp_path / "out" / "rig" / "front").is_dir()
    assert output_folder(tmp_path / "out", "rig/front") == tmp_path / "out" / "rig" / "front"  # again: found
    assert output_folder(tmp_path / "deep" / "er") == tmp_path / "deep" / "er"  # the root's parents, as mkdir -p


@pytest.mark.parametrize("below, link", [("front", "front"), ("rig/front", "rig"), ("rig/front", "rig/front")])
@pytest.mark.parametrize("dangling", [False, True])
def test_output_folder_refuses_a_link_at_any_component_below_the_root(tmp_path, below, link, dangling):
    from vision_factory.files import UnsafeWrite, check_folder, output_folder

    out = tmp_path / "out"
    target = planted(out, link, tmp_path)
    if dangling:
        target.rmdir()
    for check in (check_folder, output_folder):
        with pytest.raises(UnsafeWrite) as refused:
            check(out, below, "--out")
        message = str(refused.value)
        assert f"{out / link} is a symbolic link (to {target})" in message and "choose another --out" in message
    assert (list(target.iterdir()) == []) if not dangling else not target.exists()


def test_output_folder_refuses_a_file_at_a_component_and_a_root_under_a_file(tmp_path):
    from vision_factory.files import UnsafeWrite, check_folder, output_folder

    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "rig").write_bytes(KEPT)
    for check in (check_folder, output_folder):
        with pytest.raises(UnsafeWrite, match="rig exists and is not a folder; remove it or choose another --out"):
            check(tmp_path / "out", "rig/front", "--out")
        with pytest.raises(UnsafeWrite, match=r"it would be under a file \(.*/out/rig is a file, not a folder\)"):
            check(tmp_path / "out" / "rig" / "deeper", "", "--out")
        with pytest.raises(UnsafeWrite, match="out/rig is a file, not a folder: choose another --out"):
            check(tmp_path / "out" / "rig", "", "--out")
    assert (tmp_path / "out" / "rig").read_bytes() == KEPT


def test_the_root_the_user_named_may_be_a_link(tmp_path):
    """A link on the path the user typed is the user's (their workspace on another disk): followed."""
    from vision_factory.files import output_folder

    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real", target_is_directory=True)
    assert output_folder(tmp_path / "alias", "front").is_dir()
    assert (tmp_path / "real" / "front").is_dir()


# --- track --camera -----------------------------------------------------------------------------------------


@pytest.fixture
def shapes_bags(tmp_path):
    """Two small bags of shapes (a square and a circle on grey), for two cameras."""
    frames = []
    for index in range(3):
        frame = np.full((128, 160, 3), 114, np.uint8)
        cv2.rectangle(frame, (20 + 8 * index, 30), (70 + 8 * index, 80), (0, 0, 255), -1)
        cv2.circle(frame, (120, 60 + 4 * index), 22, (255, 0, 0), -1)
        frames.append(frame)
    return write_image_bag(tmp_path / "front_bag", frames), write_image_bag(tmp_path / "back_bag", frames[::-1])


def _track(out, front, back, *extra):
    return invoke(
        "track", "--model-type", "yolo", "--model", SHAPES_MODEL, "--out", out,
        "--camera", f"front={front}", "--camera", f"rig/back={back}", *extra,
    )  # fmt: skip


@pytest.mark.parametrize("below", ["front", "rig"])
def test_track_cameras_never_write_through_a_link_below_out(tmp_path, shapes_bags, below):
    out = tmp_path / "out"
    target = planted(out, below, tmp_path)
    assert_refused(_track(out, *shapes_bags), f"{out / below} is a symbolic link", "choose another --out")
    assert list(target.iterdir()) == []


def test_track_cameras_with_force_never_remove_what_a_link_below_out_points_at(tmp_path, shapes_bags):
    """An earlier run's tracks.txt is removed with --force: never the one a link planted at OUT/front reaches."""
    out = tmp_path / "out"
    target = planted(out, "front", tmp_path)
    (target / "tracks.txt").write_bytes(KEPT)
    assert_refused(_track(out, *shapes_bags, "--force"), f"{out / 'front'} is a symbolic link")
    assert (target / "tracks.txt").read_bytes() == KEPT and sorted(os.listdir(target)) == ["tracks.txt"]


def test_track_cameras_write_each_cameras_folder_below_out(tmp_path, shapes_bags):
    out = tmp_path / "out"
    done = _track(out, *shapes_bags)
    assert done.exit_code == 0, done.output
    assert (out / "front" / "tracks.txt").is_file() and (out / "rig" / "back" / "tracks.txt").is_file()


# --- replay --camera and verify --camera: refused before any node starts (on main they played the bags) ------


def _cameras(front, back):
    """front: the one image topic of ``front``'s bag (the command's BAG), rig/back: another bag."""
    return ["--camera", "front=/camera/image_raw", "--camera", f"rig/back={back}"]


@pytest.mark.parametrize("below", ["front", "rig"])
def test_replay_cameras_never_write_through_a_link_below_out(tmp_path, shapes_bags, below):
    out = tmp_path / "out"
    target = planted(out, below, tmp_path)
    front, back = shapes_bags
    done = run_cli("replay", str(front), "--node", "yolo", "-p", f"model_path:={SHAPES_MODEL}", "--out", str(out),
                   *_cameras(front, back))  # fmt: skip
    assert_refused_by_process(done, f"{out / below} is a symbolic link", "choose another --out")
    assert list(target.iterdir()) == []


@pytest.mark.parametrize("below", ["front", "rig", "node"])
def test_verify_cameras_never_write_through_a_link_below_out(tmp_path, shapes_bags, below):
    """Each camera's reports go to OUT/NAME/, the node's log and answers to OUT/node/: a link at any is refused."""
    out = tmp_path / "out"
    target = planted(out, below, tmp_path)
    front, back = shapes_bags
    done = run_cli("verify", str(front), "--model-type", "yolo", "--model", str(SHAPES_MODEL), "--out", str(out),
                   *_cameras(front, back))  # fmt: skip
    assert_refused_by_process(done, f"{out / below} is a symbolic link", "choose another --out")
    assert list(target.iterdir()) == []


def test_verify_of_one_camera_never_writes_through_a_link_at_out_node(tmp_path, shapes_bags):
    out = tmp_path / "out"
    target = planted(out, "node", tmp_path)
    done = run_cli("verify", str(shapes_bags[0]), "--model-type", "yolo", "--model", str(SHAPES_MODEL), "--out",
                   str(out))  # fmt: skip
    assert_refused_by_process(done, f"{out / 'node'} is a symbolic link", "choose another --out")
    assert list(target.iterdir()) == []


# --- outputs under a file ------------------------------------------------------------------------------------


def test_bag_out_under_a_file_is_a_one_line_refusal(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    cv2.imwrite(str(images / "0.png"), np.zeros((64, 64, 3), np.uint8))
    (tmp_path / "afile").write_bytes(KEPT)
    assert_refused(invoke("bag", images, "--out", tmp_path / "afile" / "bag"), "afile is a file, not a folder")
    assert (tmp_path / "afile").read_bytes() == KEPT


def test_track_out_under_a_file_is_a_one_line_refusal(tmp_path, shapes_bags):
    (tmp_path / "afile").write_bytes(KEPT)
    done = invoke("track", "--model-type", "yolo", "--model", SHAPES_MODEL, "--out", tmp_path / "afile" / "run",
                  shapes_bags[0])  # fmt: skip
    assert_refused(done, "afile is a file, not a folder")
    assert (tmp_path / "afile").read_bytes() == KEPT


# --- inputs of the wrong kind ----------------------------------------------------------------------------------


def test_eval_predictions_that_are_a_folder_are_a_one_line_refusal(tmp_path):
    """A folder where the COCO results file goes (an IsADirectoryError traceback before)."""
    (tmp_path / "coco").mkdir()
    (tmp_path / "coco" / "annotations.json").write_text('{"images": [], "annotations": [], "categories": []}')
    (tmp_path / "results").mkdir()
    done = invoke("eval", "--model-type", "yolo", "--data", tmp_path / "coco", "--predictions", tmp_path / "results",
                  "--out", tmp_path / "out")  # fmt: skip
    assert_refused(done, f"COCO results {tmp_path / 'results'} is a folder: give the JSON file")


def test_any_other_os_error_a_command_meets_is_one_line_naming_the_path(tmp_path):
    """The command line's last net (cli_support.reported): an OSError no tool turned into its own words is still one
    line naming the path, the reason and the fix, never a traceback."""
    import click

    from vision_factory.cli_support import reported

    with pytest.raises(click.ClickException) as raised, reported():
        (tmp_path / f"folder\n{chr(27)}[2J").mkdir()
        (tmp_path / f"folder\n{chr(27)}[2J").read_text()
    assert raised.value.message == (
        f"cannot use {tmp_path}/folder\\n\\x1b[2J: Is a directory; give a path of the right kind (a file or a "
        "folder) that this user can read, or write for an output"
    )
