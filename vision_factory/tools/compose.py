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
from pathlib import Path

import numpy as np

from ..results.boxes import Boxes
from ..results.frame import FrameResult
from .mot_files import MotBoxes, boxes_from_rows

MIN_VISIBLE = 0.3  # fraction of a person's pixels that must be visible for a ground truth box

# name: (source, person's box in the photo x1, y1, x2, y2, read by eye)
PEOPLE = {
    "astronaut": ("skimage:astronaut", (15, 15, 365, 512)),
    "cameraman": ("skimage:camera", (0, 60, 340, 512)),
    "grace_hopper": ("matplotlib:grace_hopper.jpg", (10, 20, 510, 600)),
}
# People no scene, option or threshold of this project was made with: the held-out single-camera scenes'
# (benchmarks/bench_tracking_held_out.py), from Debian's opencv-doc photographs (apt-get install opencv-doc).
HELD_OUT_PEOPLE = {
    "messi": ("opencv-doc:messi5.jpg", (65, 55, 460, 340)),  # kicking: wider than tall
    "catcher": ("opencv-doc:basketball1.png", (30, 75, 165, 480)),  # grey photographs
    "thrower": ("opencv-doc:basketball1.png", (430, 20, 640, 480)),
}
OPENCV_DOC = Path("/usr/share/doc/opencv-doc/examples/data")


@cache
def photo(source: str) -> np.ndarray:
    """A sample photo as BGR uint8: ``skimage:NAME`` (scikit-image's data), ``matplotlib:FILE`` (sample data) or
    ``opencv-doc:FILE`` (Debian's opencv-doc examples)."""
    import cv2

    kind, name = source.split(":", 1)
    if kind == "skimage":
        import skimage.data

        image = getattr(skimage.data, name)()
        image = image if image.ndim == 3 else cv2.cvtColor(image, cv2.COLOR_GRAY2RGB)
        return np.ascontiguousarray(image[..., ::-1])
    if kind == "opencv-doc":
        image = cv2.imread(str(OPENCV_DOC / name))
        if image is None:
            raise FileNotFoundError(f"no readable {OPENCV_DOC / name}: apt-get install opencv-doc")
        return image
    if kind == "matplotlib":
        import matplotlib.cbook

        image = cv2.imread(str(matplotlib.cbook.get_sample_data(name, asfileobj=False)))
        if image is None:
            raise FileNotFoundError(f"matplotlib's sample data has no readable {name}")
        return image
    raise ValueError(f"unknown photo source {source!r} (skimage:NAME, matplotlib:FILE or opencv-doc:FILE)")


def person(name: str, height: int, mirrored: bool = False, hue: int = 0) -> np.ndarray:
    """The crop of person ``name`` (PEOPLE) scaled to ``height`` pixels, BGR; ``mirrored``: facing the other way;
    ``hue``: its colours turned by that many degrees (someone of the same build dressed otherwise: a lookalike; a
    grey photo is tinted that hue)."""
    import cv2

    source, (x1, y1, x2, y2) = PEOPLE[name] if name in PEOPLE else HELD_OUT_PEOPLE[name]
    crop = photo(source)[y1:y2, x1:x2]
    width = max(1, round(crop.shape[1] * height / crop.shape[0]))
    scaled = cv2.resize(crop, (width, height), interpolation=cv2.INTER_AREA)
    if hue % 360:
        hsv = cv2.cvtColor(scaled, cv2.COLOR_BGR2HSV)  # OpenCV's hue is 0..179, degrees / 2
        hsv[..., 0] = ((hsv[..., 0].astype(np.int32) + hue // 2) % 180).astype(np.uint8)
        if hsv[..., 1].mean() < 10:  # grey: no colour to turn
            hsv[..., 1] = 90
        scaled = cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)
    return np.ascontiguousarray(scaled[:, ::-1]) if mirrored else scaled


GARAGE = "garage"  # the backdrop of SCENES: the stereo motorcycle pair's left view


def background(size: tuple[int, int], backdrop: str = GARAGE) -> np.ndarray:
    """The backdrop at ``size`` (width, height), BGR: GARAGE (scikit-image's stereo motorcycle pair, left view) or a
    photo (``photo``'s source)."""
    import cv2
    import skimage.data

    image = skimage.data.stereo_motorcycle()[0][..., ::-1] if backdrop == GARAGE else photo(backdrop)
    return cv2.resize(np.ascontiguousarray(image), size, interpolation=cv2.INTER_AREA)


def pillar(width: int, height: int, texture: str = "skimage:brick") -> np.ndarray:
    """A pillar of ``texture`` (a photo's left half, ``photo``'s source; scikit-image's brick wall by default),
    ``width`` x ``height``, BGR."""
    import cv2

    surface = photo(texture)
    return cv2.resize(surface[:, : surface.shape[1] // 2], (width, height), interpolation=cv2.INTER_AREA)


@dataclass(frozen=True)
class Walker:
    """A person moving through key frames: (frame, x, y) of the crop's top-left corner, linear in between (held
    before the first and after the last). Larger ``depth`` is nearer: drawn over smaller ones."""

    name: str  # a PEOPLE or HELD_OUT_PEOPLE key
    height: int  # of the crop in the frame, pixels
    keys: tuple[tuple[int, float, float], ...]
    depth: int = 0
    mirrored: bool = False  # the photo mirrored: facing the other way
    hue: int = 0  # the photo's colours turned by this many degrees: a lookalike of the photo's person

    def crop(self) -> np.ndarray:
        return person(self.name, self.height, self.mirrored, self.hue)

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
    backdrop: str = GARAGE  # background's
    pillars: str = "skimage:brick"  # the occluders' texture (pillar's)


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
    base = background(scene.size, scene.backdrop)
    for x1, y1, x2, y2 in scene.occluders:
        if not (0 <= x1 < x2 <= width and 0 <= y1 < y2 <= height):
            raise ValueError(f"occluder {(x1, y1, x2, y2)} is not inside the {width}x{height} frame")
    crops = [walker.crop() for walker in scene.walkers]
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
            frame[y1:y2, x1:x2] = pillar(x2 - x1, y2 - y1, scene.pillars)
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


# Two people who look alike (the astronaut, and someone of her build dressed in other colours: her photo's hue turned
# 120 degrees; their appearance distance is about 0.05, under any re-entry threshold), each in one of HANDOVER's
# cameras' views at the same time, while Grace Hopper walks from the right camera's view into the left one's: two
# people seen at once are two identities, whatever they look like. 90 frames at 30 fps.
LOOKALIKES = Scene(
    "lookalikes",
    90,
    (
        Walker("astronaut", 150, _walk((1, 40, 20), (90, 380, 20))),
        Walker("astronaut", 150, _walk((1, 1000, 20), (90, 700, 20)), mirrored=True, hue=120),
        Walker("grace_hopper", 150, _walk((1, 1050, 200), (90, 250, 200)), mirrored=True),
    ),
    size=(1200, 360),
    description="the astronaut in the left camera's view while her lookalike walks in the right one's; Grace Hopper "
    "walks from the right camera's view into the left one's",
)


def camera_view(composed: Composed, columns: tuple[int, int]) -> tuple[list[np.ndarray], MotBoxes]:
    """One camera's view of a composed scene: its columns (x1, x2) of each frame, and its truth in its own pixels
    with the scene's IDs (the global truth IDs): each truth box cut to the columns, kept while what is left is at
    least MIN_VISIBLE of that person's crop."""
    x1, x2 = columns
    sizes = {index + 1: np.prod(walker.crop().shape[:2]) for index, walker in enumerate(composed.scene.walkers)}
    rows = []
    truth = composed.truth
    for frame, track, (left, top, width, height) in zip(truth.frames, truth.ids, truth.boxes):
        start, end = max(left, x1), min(left + width, x2)
        if (end - start) * height >= MIN_VISIBLE * sizes[int(track)]:
            rows.append((int(frame), int(track), float(start - x1), float(top), float(end - start), float(height), 1.0))
    frames = [np.ascontiguousarray(frame[:, x1:x2]) for frame in composed.frames]
    return frames, boxes_from_rows(rows, f"{composed.scene.name} {x1}..{x2} (composed truth)")


def truth_detections(truth: MotBoxes, frames: list[np.ndarray]) -> list[FrameResult]:
    """Each frame's truth boxes (``camera_view``'s, of ``frames``) as its detections, class person, score 0.9: what
    a perfect detector would find."""
    found = []
    for number, frame in enumerate(frames, start=1):
        boxes = truth.boxes[truth.frames == number]
        xyxy = np.c_[boxes[:, :2], boxes[:, :2] + boxes[:, 2:]]
        scores, classes = np.full(len(boxes), 0.9), np.zeros(len(boxes), np.int64)
        found.append(FrameResult.of(frame, boxes=Boxes.of(xyxy, scores, classes, ["person"])))
    return found


# Hand-overs made from a seed (identities across cameras): two 560x360 cameras side by side over one wider scene, a
# gap of 60-140 pixels between their views that neither sees, and a pillar over the gap and into both views' inner
# edges, wide enough to hide anyone. Five people on random paths and speeds, each of the three photos once:
# - a crosser walks from one camera's view into the other's, behind the pillar;
# - a counter-walker, nearer (drawn over the others, larger), walks the other way over both views: a second
#   hand-over, and in one view the two pass each other, the nearer covering the crosser fully;
# - a turner walks up to the pillar from one side, waits fully hidden behind it (while the crosser passes behind it,
#   most seeds) and goes back out the side they came from: who comes out where is for appearance and timing to say;
# and two lookalikes (one of the photos, its colours turned 90-270 degrees: the same build dressed otherwise, an
# appearance distance of about 0.05 from the photo's person, under any re-entry threshold), each walking over both
# views on a lane of their own, at a time of their own.
# Everyone faces the way they walk (the photo mirrored); the seeds' groups are bench_cross_camera.py's.
HANDOVER_VIEW = 560  # each camera's width, pixels


def passing(
    crosser: tuple[str, int, int],
    counter: tuple[str, int, int],
    way: int,
    speeds: tuple[float, float],
    meet: tuple[float, float],
    frames: int,
) -> list[Walker]:
    """Two people walking straight across ``frames`` frames who pass each other centre on centre at ``meet`` (x,
    frame): the crosser ((name, height, y), drawn under) at ``way`` * speeds[0] pixels a frame (``way`` +1: left
    to right), the counter-walker (nearer, drawn over) the other way at speeds[1]; each facing where they go."""
    meet_x, meet_t = meet

    def line(centre_at: float, speed: float, crop_width: int, y: int) -> tuple:
        start = centre_at - speed * (meet_t - 1) - crop_width / 2
        return ((1, start, y), (frames, start + speed * (frames - 1), y))

    (name, height, y), (near_name, near, near_y) = crosser, counter
    return [
        Walker(name, height, line(meet_x, way * speeds[0], person(name, height).shape[1], y), 0, way < 0),
        Walker(near_name, near, line(meet_x, -way * speeds[1], person(near_name, near).shape[1], near_y), 1, way > 0),
    ]


def turning(name: str, height: int, hidden: tuple[float, float], velocity: float, still: tuple[int, int],
            frames: int) -> Walker:  # fmt: skip
    """Someone who walks at ``velocity`` pixels a frame (its sign: the side they come from, +1 the right) to
    ``hidden`` (the crop's corner x, y: behind a pillar), stands there from frame still[0] to still[1] and goes
    back out the way they came; drawn under everyone."""
    (x, y), (stop, go) = hidden, still
    keys = ((1, x + velocity * (stop - 1), y), (stop, x, y), (go, x, y), (frames, x + velocity * (frames - go), y))
    return Walker(name, height, keys, -1, velocity > 0)


def handover_scene(seed: int, backdrop: str = GARAGE, pillars: str = "skimage:brick") -> tuple[Scene, dict]:
    """The hand-over of ``seed`` (see above) on ``backdrop`` with pillars of ``pillars``: the scene and its two
    cameras ({"left": (x1, x2), "right": (x1, x2)}, camera_view's columns). The same seed gives the same scene."""
    rng = np.random.default_rng(seed)
    while True:  # paths drawn until each person does what their part says (checked on the boxes, cheaply)
        scene, cameras = _handover_draw(rng, seed, backdrop, pillars)
        if _handover_holds(scene, cameras):
            return scene, cameras


def _handover_draw(rng: np.random.Generator, seed: int, backdrop: str, pillars: str) -> tuple[Scene, dict]:
    view, frames, height = HANDOVER_VIEW, 220, 360
    gap = int(rng.integers(60, 141))
    width = 2 * view + gap
    cameras = {"left": (0, view), "right": (view + gap, width)}
    crosser, counter, turner = (str(name) for name in rng.permutation(list(PEOPLE)))
    far, near, top = int(rng.integers(120, 141)), int(rng.integers(185, 206)), int(rng.integers(115, 136))
    turner_width = person(turner, top).shape[1]
    inner = int(rng.integers(20, 41)), int(rng.integers(20, 41))  # the pillar's part in each view
    x1 = view - inner[0]
    x2 = max(view + gap + inner[1], x1 + turner_width + 30)
    centre = (x1 + x2) / 2
    near_y = height - near - int(rng.integers(0, 8))
    far_y = near_y + int(rng.integers(5, near - far - 4))  # inside the nearer's height: covered when passing
    way = 1 if rng.random() < 0.5 else -1  # the crosser's: +1 left to right
    fast, slow = float(rng.uniform(3.5, 5.5)), float(rng.uniform(3.0, 5.0))
    meet_left = rng.random() < 0.5  # the view where crosser and counter-walker pass each other
    lo, hi = cameras["left" if meet_left else "right"]
    meet_x, meet_t = float(rng.uniform(lo + 150, hi - 150)), float(rng.uniform(0.3, 0.6) * frames)

    walkers = passing((crosser, far, far_y), (counter, near, near_y), way, (fast, slow), (meet_x, meet_t), frames)
    # the turner: behind the pillar while the crosser passes behind it (most seeds), from a side drawn
    behind_t = meet_t + (centre - meet_x) / (way * fast)
    hide = int(np.clip(behind_t - rng.integers(5, 25), 25, frames - 90))
    wait, pace, side = int(rng.integers(20, 46)), float(rng.uniform(2.5, 4.5)), -1 if rng.random() < 0.5 else 1
    hidden_x, top_y = centre - turner_width / 2, int(rng.integers(0, 15))
    walkers.append(turning(turner, top, (hidden_x, top_y), side * pace, (hide, hide + wait), frames))
    for _ in range(2):  # the lookalikes
        name, tall = str(rng.choice(list(PEOPLE))), int(rng.integers(125, 171))
        hue, pace, way_x = int(rng.integers(90, 271)), float(rng.uniform(2.5, 5.0)), 1 if rng.random() < 0.5 else -1
        crop_width = person(name, tall).shape[1]
        start, y = int(rng.integers(1, frames // 2)), int(rng.integers(0, height - tall + 1))
        edge = -crop_width if way_x > 0 else width
        keys = ((start, edge, y), (frames, edge + way_x * pace * (frames - start), y))
        walkers.append(Walker(name, tall, keys, int(rng.integers(-1, 2)), way_x < 0, hue))
    description = (
        f"seed {seed}: {crosser} crosses from the {'left' if way > 0 else 'right'} camera into the other behind the "
        f"pillar; {counter}, nearer, walks the other way and covers them in the {'left' if meet_left else 'right'} "
        f"view; {turner} waits hidden behind the pillar for {wait} frames and goes back; lookalikes of "
        f"{walkers[3].name} and {walkers[4].name} walk by"
    )
    occluders = ((x1, 0, x2, height),)
    scene = Scene(
        f"handover_{seed}", frames, tuple(walkers), occluders, (width, height), description, backdrop, pillars
    )
    return scene, cameras


def _handover_holds(scene: Scene, cameras: dict) -> bool:
    """Whether the crosser and counter-walker are each half in view of both cameras (15 frames or more each), the
    turner fully behind the pillar for 15 frames or more and in view of a camera before and after, and each
    lookalike half in view of a camera for 20 frames or more."""
    (x1, _, x2, _), frames = scene.occluders[0], np.arange(1, scene.frames + 1)

    def spans(walker: Walker) -> tuple[np.ndarray, np.ndarray]:
        left = np.array([walker.corner(frame)[0] for frame in frames], float)
        return left, left + walker.crop().shape[1]

    for walker in scene.walkers[:2]:
        left, right = spans(walker)
        width = right - left
        for lo, hi in cameras.values():
            if np.sum(np.minimum(right, hi) - np.maximum(left, lo) >= width / 2) < 15:
                return False
    for walker in scene.walkers[3:]:
        left, right = spans(walker)
        width = right - left
        if sum(np.sum(np.minimum(right, hi) - np.maximum(left, lo) >= width / 2) for lo, hi in cameras.values()) < 20:
            return False
    left, right = spans(scene.walkers[2])
    hidden = (left >= x1) & (right <= x2)
    inside = np.minimum(right, scene.size[0]) - np.maximum(left, 0)
    seen = inside - (np.minimum(right, x2) - np.maximum(left, x1)).clip(0) >= 0.5 * (right - left)
    first, last = np.flatnonzero(hidden)[[0, -1]] if hidden.any() else (0, 0)
    return hidden.sum() >= 15 and seen[:first].sum() >= 15 and seen[last + 1 :].sum() >= 15
