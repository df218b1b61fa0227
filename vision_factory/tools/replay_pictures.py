"""replay --save DIR: the frames the node answered, drawn with its answers (results/drawing.py's style, as predict
--save draws them; a map beside its frame with its colour bar), as DIR/frame_NNNNNN.png: one every --save-every
answered frames, at most --save-max, written by files.py's rules into DIR only."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from ..files import check_folder, output_folder, staged
from ..results.frame import FrameResult
from ..text import shown_path

SAVE_MAX = 1000  # frames drawn at most (replay --save-max)
OPTION = "--save"


def picture_name(frame: int) -> str:
    return f"frame_{frame:06d}.png"


def _earlier(folder: Path) -> list[Path]:
    """An earlier replay's pictures in ``folder`` (files and links named frame_NNNNNN.png)."""
    if not folder.is_dir():
        return []
    return sorted(path for path in folder.glob("frame_*.png") if path.is_symlink() or path.is_file())


def check_save(folder: Path | None, force: bool) -> None:
    """Before anything plays: ``folder`` (--save) refused where a link or a file stands in its way, or where it
    holds an earlier replay's pictures, unless ``force``, which removes those (links themselves, never what they
    point to) and nothing else."""
    if folder is None:
        return
    check_folder(folder, option=OPTION)
    earlier = _earlier(folder)
    if earlier and not force:
        raise FileExistsError(
            f"{shown_path(folder)} holds an earlier replay's pictures ({earlier[0].name}, ... {len(earlier)} in all): "
            f"choose another {OPTION} folder, or --force to replace them"
        )
    for path in earlier:
        path.unlink()


def chosen(frames: Iterable[int], every: int, most: int) -> list[int]:
    """The answered ``frames`` drawn: every ``every``-th of them in frame order (the first included), at most
    ``most``."""
    return sorted(frames)[::every][:most]


def drawn(frame: np.ndarray, result: FrameResult) -> np.ndarray:
    """The frame with the node's answers drawn over it (FrameResult.draw); a map beside the frame instead, drawn
    with its colour bar (results/dense.py), the frame scaled to its height."""
    import cv2

    canvas = frame if frame.ndim == 3 else cv2.cvtColor(frame, cv2.COLOR_GRAY2BGR)
    if result.dense is None:
        return result.draw(canvas.copy())
    drawn_map = result.dense.draw()
    height = drawn_map.shape[0]
    width = max(1, round(canvas.shape[1] * height / canvas.shape[0]))
    return np.hstack([cv2.resize(canvas, (width, height), interpolation=cv2.INTER_AREA), drawn_map])


def save_pictures(
    folder: Path,
    frames: Iterable[tuple[int, np.ndarray]],
    found: Mapping[int, FrameResult],
    every: int = 1,
    most: int = SAVE_MAX,
    inputs: Sequence = (),
) -> dict[str, object]:
    """Each chosen answered frame (``chosen``) of ``frames`` ((index, BGR frame) in order, read one at a time)
    drawn with its answer in ``found`` as FOLDER/frame_NNNNNN.png (never through a link, nor onto one of
    ``inputs``); what replay.json says of them: the folder, the frames drawn, the first and last picture."""
    import cv2

    output_folder(folder, option=OPTION)
    wanted = set(chosen(found, every, most))
    written: list[str] = []
    for index, frame in frames:
        if index in wanted:
            path = folder / picture_name(index)
            with staged(path, inputs, OPTION) as fresh:
                if not cv2.imwrite(str(fresh), drawn(frame, found[index])):
                    raise ValueError(f"cannot write {shown_path(path)}: OpenCV wrote no PNG")
            written.append(path.name)
            if len(written) == len(wanted):
                break
    first, last = (written[0], written[-1]) if written else ("", "")
    return {"folder": str(folder), "frames": len(written), "every": every, "first": first, "last": last}
