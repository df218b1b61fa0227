"""Tracking sequences composed from real photos, with exact ground truth: people cut from real photos walk over a
real background, cross, and hide behind each other or behind an occluder, then come back where motion alone does
not expect them.

The people are the three portraits that ship with scikit-image and matplotlib (NASA's astronaut Eileen Collins,
the cameraman of scikit-image's ``camera``, Grace Hopper); the background is the garage of scikit-image's stereo
motorcycle pair and the occluder a pillar cut from its brick-wall photo. Each person is a rectangular crop of the
photo around them (box read off the photo by eye), scaled to a height in the frame and pasted at a position
interpolated between key frames; layers are drawn back to front (``depth``), occluders last.

Ground truth (MOTChallenge: ``frame,id,x,y,w,h,1,-1,-1,-1``, frames from 1, IDs 1.. in the scene's order) is the
box of each person's *visible* pixels, listed while at least ``MIN_VISIBLE`` of the person is visible: what a
detector can find, exactly, without any model's output. No ROS.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from .mot_files import MotBoxes, boxes_from_rows

MIN_VISIBLE = 0.3  # fraction of a person's pixels that must be visible for a ground truth box

# name: (source, person's box in the photo x1, y1, x2, y2, read by eye)
PEOPLE = {
    "astronaut": ("skimage:astronaut", (15, 15, 365, 512)),
    "cameraman": ("skimage:camera", (0, 60, 340, 512)),
    "grace_hopper": ("matplotlib:grace_hopper.jpg", (10, 20, 510, 600)),
}


@cache
def photo(source: str) -> np.ndarray:
    """A sample photo as BGR uint8: ``skimage:NAME`` (scikit-image's data) or ``matplotlib:FILE`` (sample data)."""
    import cv2

    kind, name = source.split(":", 1)
    if kind == "skimage":
        import skimage.data

        image = getattr(skimage.data, name)()
        image = image if image.ndim == 3 else cv2.cvtColor(image, cv2.COLOR_GRAY2RGB)
        return np.ascontiguousarray(image[..., ::-1])
    if kind == "matplotlib":
        import matplotlib.cbook

        image = cv2.imread(str(matplotlib.cbook.get_sample_data(name, asfileobj=False)))
        if image is None:
            raise FileNotFoundError(f"matplotlib's sample data has no readable {name}")
        return image
    raise ValueError(f"unknown photo source {source!r} (skimage:NAME or matplotlib:FILE)")


def person(name: str, height: int) -> np.ndarray:
    """The crop of person ``name`` (PEOPLE) scaled to ``height`` pixels, BGR."""
    import cv2

    source, (x1, y1, x2, y2) = PEOPLE[name]
    crop = photo(source)[y1:y2, x1:x2]
    width = max(1, round(crop.shape[1] * height / crop.shape[0]))
    return cv2.resize(crop, (width, height), interpolation=cv2.INTER_AREA)


def background(size: tuple[int, int]) -> np.ndarray:
    """The garage of scikit-image's stereo motorcycle pair (left view) at ``size`` (width, height), BGR."""
    import cv2
    import skimage.data

    left = skimage.data.stereo_motorcycle()[0]
    return cv2.resize(np.ascontiguousarray(left[..., ::-1]), size, interpolation=cv2.INTER_AREA)


def pillar(width: int, height: int) -> np.ndarray:
    """A brick pillar, cut from scikit-image's brick-wall photo, ``width`` x ``height``, BGR."""
    import cv2

    bricks = photo("skimage:brick")
    return cv2.resize(bricks[:, : bricks.shape[1] // 2], (width, height), interpolation=cv2.INTER_AREA)


@dataclass(frozen=True)
class Walker:
    """A person moving through key frames: (frame, x, y) of the crop's top-left corner, linear in between (held
    before the first and after the last). Larger ``depth`` is nearer: drawn over smaller ones."""

    name: str  # a PEOPLE key
    height: int  # of the crop in the frame, pixels
    keys: tuple[tuple[int, float, float], ...]
    depth: int = 0

    def corner(self, frame: int) -> tuple[int, int]:
        frames, xs, ys = (np.array(values, float) for values in zip(*self.keys))
        return round(float(np.interp(frame, frames, xs))), round(float(np.interp(frame, frames, ys)))


@dataclass(frozen=True)
class Scene:
    name: str
    frames: int
    walkers: tuple[Walker, ...]
    occluders: tuple[tuple[int, int, int, int], ...] = ()  # x1, y1, x2, y2: pillars drawn over everyone
    size: tuple[int, int] = (640, 360)  # width, height
    description: str = ""


@dataclass
class Composed:
    scene: Scene
    frames: list[np.ndarray] = field(repr=False)  # BGR, frame 1 first
    truth: MotBoxes = field(repr=False)

    @property
    def hidden(self) -> dict[int, int]:
        """Truth ID: the longest run of frames that person is missing from the truth (hidden), in frames."""
        longest = {}
        for track in np.unique(self.truth.ids):
            frames = np.sort(self.truth.frames[self.truth.ids == track])
            longest[int(track)] = int((np.diff(frames) - 1).max(initial=0))
        return longest


def compose(scene: Scene) -> Composed:
    """The frames of ``scene`` and its ground truth (the visible box of each person, see the module)."""
    width, height = scene.size
    base = background(scene.size)
    for x1, y1, x2, y2 in scene.occluders:
        if not (0 <= x1 < x2 <= width and 0 <= y1 < y2 <= height):
            raise ValueError(f"occluder {(x1, y1, x2, y2)} is not inside the {width}x{height} frame")
    crops = [person(walker.name, walker.height) for walker in scene.walkers]
    order = sorted(range(len(scene.walkers)), key=lambda index: scene.walkers[index].depth)
    frames, rows = [], []
    for number in range(1, scene.frames + 1):
        frame = base.copy()
        owner = np.full((height, width), -1, np.int64)  # which walker each pixel shows
        for index in order:
            crop = crops[index]
            x, y = scene.walkers[index].corner(number)
            # the part of the crop inside the frame
            fx1, fy1 = max(x, 0), max(y, 0)
            fx2, fy2 = min(x + crop.shape[1], width), min(y + crop.shape[0], height)
            if fx1 >= fx2 or fy1 >= fy2:
                continue
            frame[fy1:fy2, fx1:fx2] = crop[fy1 - y : fy2 - y, fx1 - x : fx2 - x]
            owner[fy1:fy2, fx1:fx2] = index
        for x1, y1, x2, y2 in scene.occluders:
            frame[y1:y2, x1:x2] = pillar(x2 - x1, y2 - y1)
            owner[y1:y2, x1:x2] = -1
        for index, crop in enumerate(crops):
            ys, xs = np.nonzero(owner == index)
            if len(xs) < MIN_VISIBLE * crop.shape[0] * crop.shape[1]:
                continue
            x1, y1, x2, y2 = xs.min(), ys.min(), xs.max() + 1, ys.max() + 1
            rows.append((number, index + 1, float(x1), float(y1), float(x2 - x1), float(y2 - y1), 1.0))
        frames.append(frame)
    return Composed(scene, frames, boxes_from_rows(rows, f"{scene.name} (composed truth)"))


# The tracking options of the appearance check (`vision-factory track` options, tools/track.py), with and without
# re-identification. The appearance thresholds are those of the MobileNetV2 embedder (ImageNet features, all
# positive after its ReLU): on these scenes the cosine of a detection scoring 0.5 or more (those appearance uses)
# and the person's first crop is 0.73..1.00 for the same person (partly hidden: the lower end), 0.56..0.72 for
# another, so the defaults made for trained re-id models (BoT-SORT's appearance_threshold 0.25, i.e. cosine over
# 0.5, and the veto at cosine under 0.2) would link different people and veto none. Here appearance counts from
# cosine 0.8 (distance 0.1), vetoes under 0.7 (0.15) and re-entry needs 0.8. track_buffer covers the longest time
# someone is out of sight (about 45 frames); per_class is off because the fall detector calls one person Normal in
# a frame and Fall in the next. These three thresholds are the hand-found reference: `vision-factory reid-tune`
# (tools/reid_tune.py) measures them for any embedder and writes them into the model, which the tracker then uses.
MOTION_OPTIONS = {"--track-buffer": 60, "--track-per-class": False}
REID_OPTIONS = {
    **MOTION_OPTIONS,
    "--track-appearance-threshold": 0.1,
    "--track-appearance-veto": 0.15,
    "--track-reentry-threshold": 0.1,
}


def _walk(*keys: tuple[int, float, float]) -> tuple[tuple[int, float, float], ...]:
    return tuple(keys)


# The scenes of the appearance check (test/test_tracking_reid.py, benchmarks/bench_tracking_reid.py): 640x360 at
# 30 fps; in each, someone is fully hidden for a second or more and comes back moving the other way, where the
# Kalman prediction (which coasts on at the last velocity) does not expect them.
SCENES = (
    Scene(
        "turn_behind_pillar",
        76,
        (
            Walker("astronaut", 150, _walk((1, 95, 190), (26, 250, 190), (56, 250, 190), (76, 60, 190))),
            Walker("grace_hopper", 150, _walk((1, 460, 185), (24, 258, 185), (58, 258, 185), (76, 470, 185))),
        ),
        occluders=((245, 0, 395, 360),),
        description="two people walk towards each other behind a brick pillar, wait there hidden, and each "
        "turns back to the side they came from",
    ),
    Scene(
        "hide_behind_person",
        82,
        (
            Walker("cameraman", 200, _walk((1, 300, 150), (82, 300, 150)), depth=1),
            Walker("astronaut", 150, _walk((1, 110, 195), (30, 320, 195), (60, 320, 195), (82, 130, 195))),
        ),
        description="one person walks behind another who stands filming, stays hidden behind him, and turns "
        "back the way she came",
    ),
)


# A scene no threshold of this project was chosen on (neither by hand nor by `reid-tune`): three people, 640x360 at
# 30 fps, 150 frames. The astronaut walks right behind a brick pillar, stops there hidden for about a second and
# walks on out of its other side; Grace Hopper comes from the right behind the same pillar meanwhile, waits hidden
# and turns back, out of the picture; the cameraman, nearer (drawn over her), comes in from the right and crosses
# the astronaut, covering her fully as they pass. Online calibration (models/reid_calibration.py) is measured on it.
HELD_OUT = Scene(
    "pillar_turn_and_cross",
    150,
    (
        Walker("astronaut", 150, _walk((1, 10, 195), (40, 275, 195), (75, 275, 195), (150, 560, 195))),
        Walker("grace_hopper", 150, _walk((1, 500, 190), (35, 262, 190), (70, 262, 190), (105, 660, 190))),
        Walker("cameraman", 190, _walk((1, 700, 165), (100, 660, 165), (150, 300, 165)), depth=1),
    ),
    occluders=((250, 0, 400, 360),),
    description="one walks behind a pillar, waits hidden and walks on; another goes behind it and turns back while "
    "hidden; a third, nearer, crosses the first and covers her fully",
)


def scenes() -> Iterator[Composed]:
    """SCENES composed, in order."""
    for scene in SCENES:
        yield compose(scene)


# Two cameras over one scene (identities across cameras, models/global_ids.py): a 1200x360 scene seen by two cameras,
# each a 560x360 crop, left (x 0..560) and right (x 640..1200), with 80 pixels between them that neither sees. Two
# people walk the upper lane from the left camera's view into the right one's, one after the other (never side by
# side) and out of the picture; the cameraman walks the lower lane from the right camera's view into the left
# one's. 150 frames at 30 fps.
HANDOVER = Scene(
    "handover",
    150,
    (
        Walker("astronaut", 150, _walk((1, 20, 10), (120, 1210, 10))),
        Walker("grace_hopper", 150, _walk((30, -130, 10), (150, 1070, 10))),
        Walker("cameraman", 150, _walk((1, 1080, 205), (150, 20, 205))),
    ),
    size=(1200, 360),
    description="two people walk from the left camera's view into the right one's, one after the other; a third "
    "walks from the right camera's view into the left one's on a lower lane",
)
HANDOVER_CAMERAS = {"left": (0, 560), "right": (640, 1200)}  # camera: its columns of the scene, x1..x2


def camera_view(composed: Composed, columns: tuple[int, int]) -> tuple[list[np.ndarray], MotBoxes]:
    """One camera's view of a composed scene: its columns (x1, x2) of each frame, and its truth in its own pixels
    with the scene's IDs (the global truth IDs): each truth box cut to the columns, kept while what is left is at
    least MIN_VISIBLE of that person's crop."""
    x1, x2 = columns
    sizes = {
        index + 1: np.prod(person(walker.name, walker.height).shape[:2])
        for index, walker in enumerate(composed.scene.walkers)
    }
    rows = []
    truth = composed.truth
    for frame, track, (left, top, width, height) in zip(truth.frames, truth.ids, truth.boxes):
        start, end = max(left, x1), min(left + width, x2)
        if (end - start) * height >= MIN_VISIBLE * sizes[int(track)]:
            rows.append((int(frame), int(track), float(start - x1), float(top), float(end - start), float(height), 1.0))
    frames = [np.ascontiguousarray(frame[:, x1:x2]) for frame in composed.frames]
    return frames, boxes_from_rows(rows, f"{composed.scene.name} {x1}..{x2} (composed truth)")
