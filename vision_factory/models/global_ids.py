"""Identities across cameras: one global ID per person over every camera of a node, from the per-camera trackers'
tracks and their appearance features (models/tracker.py). No ROS.

Each camera's tracker gives its confirmed tracks IDs of its own (1, 2, ... per camera). ``GlobalIdentities`` links
each such track to a global identity:

- a gallery of recent appearances per identity: the features (unit rows, the track's running feature) of the
  tracks linked to it, with the time each was seen; bounded by a time window (``window_s``: appearances older than
  the newest frame's time minus it are forgotten, and an identity with none left is gone) and a size
  (``gallery_size`` appearances per identity, the most recent; at most ``max_identities`` identities, the least
  recently seen forgotten first);
- a camera's track seen for the first time is matched to the identities by appearance alone: its distance to an
  identity, (1 - cos) / 2 as the tracker's, is the smallest over that identity's gallery; the pairs are assigned
  optimally (the tracker's ``assign``) under ``threshold``: the cameras' trackers' re-entry threshold in use
  (``reentry_threshold``: reid-tune's from the model's metadata, the parameter, or calibrated online), the strict
  threshold by which a tracker gives a person coming back from out of view their ID back. Unmatched, it starts a
  new identity;
- an identity held by a track of a camera in this frame is never given to another track of that camera in the
  same frame: two people seen at once by one camera are two identities;
- a track keeps its identity for as long as it lives, with one exception: while its identity is its own (not
  matched to an earlier one) and young (fewer than ``settle`` appearances: a person walking into a view is cut by
  its edge, and their first crops look little like them), it is matched again each frame, and joins an earlier
  identity as soon as it matches one; its own young identity is then dropped. Once ``settle`` appearances old, or
  linked to an earlier identity, it is confirmed and kept;
- ``forget(camera)`` when a camera's stream starts anew (its tracker's IDs count from 1 again): its track links go,
  the identities' galleries stay.

Global IDs are positive integers counted from 1 and never reused.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .tracker import Tracking, appearance_distance, assign

WINDOW_S = 60.0  # seconds an appearance stays in the gallery
GALLERY_SIZE = 100  # appearances kept per identity, the most recent
MAX_IDENTITIES = 1000  # identities kept, the most recently seen
SETTLE = 15  # appearances after which a track's own new identity is confirmed (half a second at 30 fps)


@dataclass
class _Identity:
    number: int
    gallery: deque = field(default_factory=deque)  # (time_s, feature), oldest first
    last_s: float = float("-inf")


@dataclass
class _Link:
    identity: int
    seen: int = 0  # appearances of the track
    confirmed: bool = False  # linked to an earlier identity, or seen SETTLE times


class GlobalIdentities:
    """``update(camera, time_s, tracks, threshold)`` once per camera frame, frames in time order -> the global ID
    of each of the frame's confirmed tracks (see the module)."""

    def __init__(
        self,
        window_s: float = WINDOW_S,
        gallery_size: int = GALLERY_SIZE,
        max_identities: int = MAX_IDENTITIES,
        settle: int = SETTLE,
    ):
        if window_s <= 0 or gallery_size < 1 or max_identities < 1 or settle < 1:
            raise ValueError(
                f"window_s ({window_s}) must be over 0; gallery_size ({gallery_size}), max_identities "
                f"({max_identities}) and settle ({settle}) at least 1"
            )
        self.window_s, self.gallery_size, self.max_identities, self.settle = (
            window_s,
            gallery_size,
            max_identities,
            settle,
        )
        self.identities: OrderedDict[int, _Identity] = OrderedDict()  # least recently seen first
        self.links: dict[tuple[str, int], _Link] = {}
        self._next = 1

    def update(
        self, camera: str, time_s: float, tracks: Sequence[tuple[int, np.ndarray | None]], threshold: float
    ) -> dict[int, int]:
        """The global ID of each of ``camera``'s tracks in a frame at ``time_s``: ``tracks`` the frame's (track ID,
        unit feature or None: no appearance) of its confirmed tracks, each once; ``threshold`` the appearance
        distance under which a new track joins an identity (0: never)."""
        self._expire(time_s)
        found: dict[int, int] = {}
        held: set[int] = set()
        fresh = []  # (track ID, feature) to match: new, or young with an identity of their own
        for track, feature in tracks:
            link = self.links.get((camera, track))
            if link is not None and link.identity not in self.identities:  # its identity expired (or was evicted)
                link = None
            if link is None or (not link.confirmed and feature is not None):
                fresh.append((track, feature))
            else:
                found[track] = link.identity
                held.add(link.identity)
        # identities held by this camera's young tracks stay theirs unless they join an earlier one
        young = {self.links[(camera, track)].identity for track, _ in fresh if (camera, track) in self.links}
        candidates = [number for number in self.identities if number not in held and number not in young]
        matches = self._match([feature for _, feature in fresh], candidates, threshold)
        for row, (track, _) in enumerate(fresh):
            key = (camera, track)
            link = self.links.get(key)
            if link is not None and link.identity not in self.identities:
                link = None
            if row in matches:
                number = candidates[matches[row]]
                if link is not None:
                    self._drop(link.identity, into=number)
                link = _Link(number, link.seen if link is not None else 0, confirmed=True)
            elif link is None:
                link = _Link(self._new_identity())
            self.links[key] = link
            found[track] = link.identity
            held.add(link.identity)
        for track, feature in tracks:
            link = self.links[(camera, track)]
            link.seen += 1
            link.confirmed = link.confirmed or link.seen >= self.settle
            self._remember(link.identity, time_s, feature)
        return found

    def forget(self, camera: str) -> None:
        """``camera``'s stream starts anew: its track IDs mean nothing any more (the identities stay)."""
        self.links = {key: link for key, link in self.links.items() if key[0] != camera}

    def reset(self) -> None:
        """Forget everything; global IDs count on (never reused)."""
        self.identities.clear()
        self.links.clear()

    def _match(self, features: list[np.ndarray | None], candidates: list[int], threshold: float) -> dict[int, int]:
        """row of ``features`` -> column of ``candidates``, by the smallest distance to each identity's gallery."""
        rows = [row for row, feature in enumerate(features) if feature is not None]
        if threshold <= 0 or not rows or not candidates:
            return {}
        queries = np.stack([features[row] for row in rows])
        cost = np.full((len(rows), len(candidates)), np.inf)
        for column, number in enumerate(candidates):
            gallery = self.identities[number].gallery
            if gallery:
                cost[:, column] = appearance_distance(np.stack([f for _, f in gallery]), queries).min(axis=0)
        return {rows[row]: column for row, column in assign(cost, threshold)}

    def _new_identity(self) -> int:
        number, self._next = self._next, self._next + 1
        self.identities[number] = _Identity(number)
        while len(self.identities) > self.max_identities:
            oldest = next(iter(self.identities))
            self._drop(oldest)
        return number

    def _drop(self, number: int, into: int | None = None) -> None:
        """Drop identity ``number``; its appearances join identity ``into`` when given."""
        identity = self.identities.pop(number, None)
        if identity is not None and into is not None:
            for time_s, feature in identity.gallery:
                self._remember(into, time_s, feature)

    def _remember(self, number: int, time_s: float, feature: np.ndarray | None) -> None:
        identity = self.identities[number]
        identity.last_s = max(identity.last_s, time_s)
        self.identities.move_to_end(number)
        if feature is not None:
            identity.gallery.append((time_s, np.asarray(feature, np.float32)))
            while len(identity.gallery) > self.gallery_size:
                identity.gallery.popleft()

    def _expire(self, time_s: float) -> None:
        """Appearances older than the window; identities with none left and not seen within it."""
        oldest = time_s - self.window_s
        for number in list(self.identities):
            identity = self.identities[number]
            while identity.gallery and identity.gallery[0][0] < oldest:
                identity.gallery.popleft()
            if not identity.gallery and identity.last_s < oldest:
                del self.identities[number]
        if len(self.links) > 4 * self.max_identities:  # links of identities gone
            self.links = {key: link for key, link in self.links.items() if link.identity in self.identities}


def camera_tracks(tracking: Tracking, track_ids: Sequence[int | None]) -> list[tuple[int, np.ndarray | None]]:
    """The (track ID, running feature) of each confirmed track among a frame's ``track_ids`` (a camera tracker's
    answer), each once: what ``GlobalIdentities.update`` takes."""
    features = {track.id: track.feature for track in tracking.tracker.tracks if track.id}
    seen = dict.fromkeys(track for track in track_ids if track is not None)
    return [(track, features.get(track)) for track in seen]


def reentry_threshold(trackings: Iterable[Tracking]) -> float:
    """The threshold a new track joins an identity under: the cameras' trackers' re-entry threshold in use now.
    Fixed ones (reid-tune's from the model's metadata, or the parameter) are the same on every camera; calibrated
    online, each camera's tracker measures its own (one camera may not yet have seen two people at once while
    another has), and the one measured on the most distances is taken. 0 (never) without re-id."""
    best, most = 0.0, -1
    for tracking in trackings:
        if tracking.embedder is None:
            continue
        tracker = tracking.tracker
        calibration = tracker.calibration
        if calibration is None or "reentry_threshold" not in calibration.fields:
            return tracker.config.reentry_threshold  # fixed: every camera's
        measured = min(len(calibration.same), len(calibration.different)) if tracker.measured else 0
        if measured > most:
            best, most = tracker.config.reentry_threshold, measured
    return best


def global_ids(
    identities: GlobalIdentities,
    camera: str,
    time_s: float,
    tracking: Tracking,
    track_ids: Sequence[int | None],
    threshold: float,
) -> list[int | None]:
    """A camera frame's track IDs (its tracker's, ``tracking``) as global IDs, matched under ``threshold``
    (``reentry_threshold`` of the cameras' trackings)."""
    found = identities.update(camera, time_s, camera_tracks(tracking, track_ids), threshold)
    return [None if track is None else found[track] for track in track_ids]
