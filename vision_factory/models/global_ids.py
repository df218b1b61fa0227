"""Identities across cameras: one global ID per person over every camera of a node, from the per-camera trackers'
tracks and their appearance features (models/tracker.py). No ROS.

Each camera's tracker gives its confirmed tracks IDs of its own (1, 2, ... per camera). ``GlobalIdentities`` links
each such track to a global identity, and a global ID is on one person at a time:

- a gallery of recent appearances per identity: the features (unit rows, the track's running feature) of the
  tracks linked to it, with the time each was seen; bounded by a time window (``window_s``: appearances older than
  the newest frame's time minus it are forgotten, and an identity with none left is gone: the longest gap a
  hand-over bridges) and a size (``gallery_size`` appearances per identity, the most recent; at most
  ``max_identities`` identities, the least recently seen forgotten first);
- a camera's track seen for the first time is matched to the identities it may take (below) by appearance: its
  distance to an identity, (1 - cos) / 2 as the tracker's, is the smallest over that identity's gallery; the pairs
  are assigned optimally (the tracker's ``assign``) under ``threshold``: the cameras' trackers' re-entry threshold
  in use (``reentry_threshold``: reid-tune's from the model's metadata, the parameter, or calibrated online), the
  strict threshold by which a tracker gives a person coming back from out of view their ID back. Unmatched, it
  starts a new identity;
- timing: a track may take an identity only when no other track holding it was seen since the track itself was
  first seen: two tracks alive at once, on one camera or two, are two people, however alike they look. A hand-over
  is the other camera's track ending before this one starts (at least FRAMES_APART of that camera's frame periods
  before: the cameras' frames of one time come in turn), within ``window_s``. Cameras whose views overlap
  (``overlapping``: one person seen by both at once) are exempt, pair by pair;
- a hand-over taken back: when the track an identity came from is seen again (its person had not left: hidden at
  its view's edge or behind someone, say) while another track holds the identity, their lifetimes now overlap,
  and the track that took the identity later loses it: it is matched afresh (as someone else) from that frame on;
- a hand-over taken back for a better match: when a new track that may take no identity matches one that a
  track of another camera took by a hand-over, by BETTER_BY closer than that holder on the identity's appearances
  from before the hand-over (a lookalike took it while its person was out of sight, and here they are), the holder
  gives it up at its camera's next frame (never to take it again) and the new track takes it at its own;
- a track keeps its identity for as long as it lives, with those exceptions and one other: while its identity is its
  own (not matched to an earlier one) and young (fewer than ``settle`` appearances: a person walking into a view is
  cut by its edge, and their first crops look little like them), it is matched again each frame, and joins an
  earlier identity as soon as it matches one it may take; its own young identity is then dropped. Once ``settle``
  appearances old, or linked to an earlier identity, it is confirmed and kept;
- ``forget(camera)`` when a camera's stream starts anew (its tracker's IDs count from 1 again): its track links go,
  the identities' galleries stay.

Global IDs are positive integers counted from 1 and never reused.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .reid_calibration import MARGIN, MIN_SAMPLES
from .tracker import Tracking, appearance_distance, assign

WINDOW_S = 60.0  # seconds an appearance stays in the gallery: the longest hand-over gap
GALLERY_SIZE = 100  # appearances kept per identity, the most recent
MAX_IDENTITIES = 1000  # identities kept, the most recently seen
SETTLE = 15  # appearances after which a track's own new identity is confirmed (half a second at 30 fps)
FRAMES_APART = 1.5  # a hand-over's shortest gap, in frame periods of the camera it leaves: its next frame may be due
BETTER_BY = 0.02  # appearance distance by which a new track must match an identity's earlier appearances better


@dataclass
class _Identity:
    number: int
    gallery: deque = field(default_factory=deque)  # (time_s, feature, the (camera, track) seen), oldest first
    last_s: float = float("-inf")
    holders: set = field(default_factory=set)  # the (camera, track) keys linked to it


@dataclass
class _Link:
    """A camera's track: its lifetime as seen here (first and last time), and its identity (None: to be matched)."""

    first_s: float
    last_s: float
    identity: int | None = None
    since_s: float = 0.0  # when it took its identity
    seen: int = 0  # appearances with its identity
    confirmed: bool = False  # linked to an earlier identity, or seen SETTLE times with its own
    refused: set = field(default_factory=set)  # identities it gave up to a track that matches them better


class GlobalIdentities:
    """``update(camera, time_s, tracks, threshold)`` once per camera frame, frames in time order -> the global ID
    of each of the frame's confirmed tracks (see the module). ``overlapping``: pairs of cameras whose views overlap
    (one person can be seen by both at once), e.g. [("front", "left")]."""

    def __init__(
        self,
        window_s: float = WINDOW_S,
        gallery_size: int = GALLERY_SIZE,
        max_identities: int = MAX_IDENTITIES,
        settle: int = SETTLE,
        overlapping: Iterable[tuple[str, str]] = (),
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
        self.overlapping = {frozenset(pair) for pair in overlapping}
        self.frames: dict[str, tuple[float, float]] = {}  # camera: (time of its last frame, its frame period)
        self.identities: OrderedDict[int, _Identity] = OrderedDict()  # least recently seen first
        self.links: dict[tuple[str, int], _Link] = {}
        self.claims: dict[int, tuple[str, int]] = {}  # identity: a track of another camera that matches it better
        self._next = 1

    def update(
        self, camera: str, time_s: float, tracks: Sequence[tuple[int, np.ndarray | None]], threshold: float
    ) -> dict[int, int]:
        """The global ID of each of ``camera``'s tracks in a frame at ``time_s``: ``tracks`` the frame's (track ID,
        unit feature or None: no appearance) of its confirmed tracks, each once; ``threshold`` the appearance
        distance under which a new track joins an identity (0: never)."""
        self._expire(time_s)
        last, period = self.frames.get(camera, (time_s, 0.0))
        self.frames[camera] = (time_s, time_s - last if time_s > last else period)
        keys = [(camera, track) for track, _ in tracks]
        for key in keys:
            link = self.links.setdefault(key, _Link(time_s, time_s))
            if link.identity is not None and link.identity not in self.identities:  # expired (or evicted)
                link.identity = None
            link.last_s = time_s
        for key in keys:  # a track seen again while another took its identity
            self._settle_conflicts(key, time_s)
        for key in keys:  # a track whose identity a new track of another camera matches better gives it up
            number = self.links[key].identity
            claimant = self.claims.pop(number, None) if number is not None else None
            if claimant in self.links and self._seen_since(claimant, time_s, camera):
                self._release(key)
                self.links[key].refused.add(number)
        fresh = [  # to be matched: new (or revoked), or young with an identity of their own
            (key, feature)
            for key, (_, feature) in zip(keys, tracks)
            if self.links[key].identity is None or (not self.links[key].confirmed and feature is not None)
        ]
        rows = [[number for number in self.identities if self._may_take(key, number)] for key, _ in fresh]
        matches = self._match([feature for _, feature in fresh], rows, threshold)
        for row, (key, feature) in enumerate(fresh):
            if row not in matches and feature is not None and threshold > 0:
                self._claim(key, feature, threshold)
        for row, (key, _) in enumerate(fresh):
            link = self.links[key]
            if row in matches:
                number = matches[row]
                if link.identity is not None:
                    self._drop(link.identity, into=number)
                self._hold(key, number, time_s, link.seen, confirmed=True)
            elif link.identity is None:
                self._hold(key, self._new_identity(), time_s, 0, confirmed=False)
        found = {}
        for (track, feature), key in zip(tracks, keys):
            link = self.links[key]
            link.seen += 1
            link.confirmed = link.confirmed or link.seen >= self.settle
            self._remember(link.identity, time_s, feature, key)
            found[track] = link.identity
        return found

    def _claim(self, key: tuple[str, int], feature: np.ndarray, threshold: float) -> None:
        """A new track that may take no identity: the one held by a track of another camera that took it by a
        hand-over, which this track matches (under ``threshold``) by BETTER_BY closer than its holder does, on the
        appearances from before that hand-over: a lookalike took it while its person was out of sight. Claimed,
        the holder gives it up at its camera's next frame, and this track takes it at its own."""
        best = None
        for number, identity in self.identities.items():
            blocking = [other for other in identity.holders if self._overlap(key, other)]
            if len(blocking) != 1 or blocking[0][0] == key[0] or number == self.links[key].identity:
                continue
            holder = blocking[0]
            since = self.links[holder].since_s
            before = [seen for time_s, seen, by in identity.gallery if by != holder and time_s < since]
            last = [seen for _, seen, by in identity.gallery if by == holder][-1:]
            if not before or not last:
                continue  # its holder is its first
            distances = appearance_distance(np.stack(before), np.stack([feature, last[0]])).min(axis=0)
            mine, theirs = float(distances[0]), float(distances[1])
            if mine < threshold and mine + BETTER_BY < theirs and (best is None or mine < best[0]):
                best = (mine, number)
        if best is not None:
            self.claims[best[1]] = key

    def _may_take(self, key: tuple[str, int], number: int) -> bool:
        """Whether track ``key`` may take identity ``number`` (not its own young one): no other track holding it was
        seen since ``key`` was first seen (two tracks alive at once are two people), but on a camera whose view
        overlaps its own."""
        link = self.links[key]
        if link.identity == number or number in link.refused:
            return False
        return not any(self._overlap(key, other) for other in self.identities[number].holders)

    def _overlap(self, key: tuple[str, int], other: tuple[str, int]) -> bool:
        """Whether ``other``, a track seen at once with ``key`` would be another person, was seen since ``key``
        began (or in the frame of the same time of its camera: ``_seen_since``)."""
        return self._apart(key, other) and self._seen_since(other, self.links[key].first_s, key[0])

    def _seen_since(self, other: tuple[str, int], time_s: float, camera: str) -> bool:
        """Whether track ``other`` was seen at ``time_s`` or later, as seen from ``camera``: a track of another
        camera also when seen so shortly before that its camera's next frame, not yet seen here, may hold it still
        (FRAMES_APART of its frame periods: the cameras' frames of one time come in turn)."""
        soon = 0.0 if other[0] == camera else FRAMES_APART * self._period(other[0])
        return self.links[other].last_s >= time_s - soon

    def _period(self, camera: str) -> float:
        """``camera``'s frame period, s (0 until it has sent two frames)."""
        return self.frames.get(camera, (0.0, 0.0))[1]

    def _apart(self, key: tuple[str, int], other: tuple[str, int]) -> bool:
        """Whether two tracks seen at once are two people: another track of the same camera, or of a camera whose
        view does not overlap its own."""
        if other == key:
            return False
        return key[0] == other[0] or frozenset((key[0], other[0])) not in self.overlapping

    def _settle_conflicts(self, key: tuple[str, int], time_s: float) -> None:
        """Track ``key``, seen now at ``time_s``, and another holding its identity whose lifetimes now overlap (its
        person left, someone else took the identity by appearance, and it came back): the one that took the identity
        later loses it and is matched afresh; but one of another camera seen at this same time (within half its
        frame period) keeps it: its frame of this time is answered already."""
        link = self.links[key]
        if link.identity is None:
            return
        for other in list(self.identities[link.identity].holders):
            if not self._overlap(key, other):
                continue
            shown = other[0] != key[0] and self.links[other].last_s > time_s - self._period(other[0]) / 2
            later = key if shown or link.since_s > self.links[other].since_s else other
            self._release(later)
            if later == key:
                return

    def _hold(self, key: tuple[str, int], number: int, time_s: float, seen: int, confirmed: bool) -> None:
        self._release(key)
        link = self.links[key]
        link.identity, link.since_s, link.seen, link.confirmed = number, time_s, seen, confirmed
        self.identities[number].holders.add(key)

    def _release(self, key: tuple[str, int]) -> None:
        link = self.links[key]
        if link.identity is not None and link.identity in self.identities:
            self.identities[link.identity].holders.discard(key)
        link.identity, link.confirmed = None, False

    def forget(self, camera: str) -> None:
        """``camera``'s stream starts anew: its track IDs mean nothing any more (the identities stay)."""
        for key in [key for key in self.links if key[0] == camera]:
            self._release(key)
            del self.links[key]

    def reset(self) -> None:
        """Forget everything; global IDs count on (never reused)."""
        self.identities.clear()
        self.links.clear()
        self.claims.clear()

    def _match(
        self, features: list[np.ndarray | None], candidates: list[list[int]], threshold: float
    ) -> dict[int, int]:
        """row of ``features`` -> the identity it takes among its ``candidates`` (their numbers), by the smallest
        distance to each identity's gallery, assigned optimally under ``threshold``."""
        rows = [row for row, feature in enumerate(features) if feature is not None and candidates[row]]
        numbers = sorted({number for row in rows for number in candidates[row]})
        if threshold <= 0 or not rows or not numbers:
            return {}
        queries = np.stack([features[row] for row in rows])
        cost = np.full((len(rows), len(numbers)), np.inf)
        for column, number in enumerate(numbers):
            gallery = self.identities[number].gallery
            if gallery:
                cost[:, column] = appearance_distance(np.stack([f for _, f, _ in gallery]), queries).min(axis=0)
        for index, row in enumerate(rows):  # only its candidates
            allowed = np.isin(numbers, candidates[row])
            cost[index, ~allowed] = np.inf
        return {rows[row]: numbers[column] for row, column in assign(cost, threshold)}

    def _new_identity(self) -> int:
        number, self._next = self._next, self._next + 1
        self.identities[number] = _Identity(number)
        while len(self.identities) > self.max_identities:
            oldest = next(iter(self.identities))
            self._drop(oldest)
        return number

    def _drop(self, number: int, into: int | None = None) -> None:
        """Drop identity ``number`` (its tracks are matched afresh); its appearances join identity ``into``."""
        identity = self.identities.pop(number, None)
        self.claims.pop(number, None)
        if identity is None:
            return
        for key in identity.holders:
            if key in self.links:
                self.links[key].identity = None
        if into is not None:
            for time_s, feature, key in identity.gallery:
                self._remember(into, time_s, feature, key)

    def _remember(self, number: int, time_s: float, feature: np.ndarray | None, key: tuple[str, int]) -> None:
        identity = self.identities[number]
        identity.last_s = max(identity.last_s, time_s)
        self.identities.move_to_end(number)
        if feature is not None:
            identity.gallery.append((time_s, np.asarray(feature, np.float32), key))
            while len(identity.gallery) > self.gallery_size:
                identity.gallery.popleft()

    def _expire(self, time_s: float) -> None:
        """Appearances older than the window; identities with none left and not seen within it; the links of
        tracks not seen within it."""
        oldest = time_s - self.window_s
        for number in list(self.identities):
            identity = self.identities[number]
            while identity.gallery and identity.gallery[0][0] < oldest:
                identity.gallery.popleft()
            if not identity.gallery and identity.last_s < oldest:
                self._drop(number)
        if len(self.links) > 4 * self.max_identities:
            for key in [key for key, link in self.links.items() if link.last_s < oldest]:
                self._release(key)
                del self.links[key]


def camera_tracks(tracking: Tracking, track_ids: Sequence[int | None]) -> list[tuple[int, np.ndarray | None]]:
    """The (track ID, running feature) of each confirmed track among a frame's ``track_ids`` (a camera tracker's
    answer), each once: what ``GlobalIdentities.update`` takes."""
    features = {track.id: track.feature for track in tracking.tracker.tracks if track.id}
    seen = dict.fromkeys(track for track in track_ids if track is not None)
    return [(track, features.get(track)) for track in seen]


def reentry_threshold(trackings: Iterable[Tracking]) -> float:
    """The threshold a new track joins an identity under. Fixed ones (reid-tune's from the model's metadata, or the
    parameter) are the same on every camera: the trackers' re-entry threshold. Calibrated online, from the distances
    every camera's tracker measured, pooled (models/reid_calibration.py): midway between the same-person 99th and the
    different-people 1st percentile when the two kinds are apart, as the trackers' rule; when they overlap (people
    seen at once who look alike: the trackers then turn re-entry off) the same-person 99th percentile: appearance
    alone cannot tell the closest people apart, timing does (a track never takes the identity of someone seen since
    it began), so hand-overs go on by appearance. 0 (never) without re-id, or until every kind has MIN_SAMPLES."""
    same, different = [], []
    for tracking in trackings:
        if tracking.embedder is None:
            continue
        calibration = tracking.tracker.calibration
        if calibration is None or "reentry_threshold" not in calibration.fields:
            return tracking.tracker.config.reentry_threshold  # fixed: every camera's
        same += calibration.same
        different += calibration.different
    if min(len(same), len(different)) < MIN_SAMPLES:
        return 0.0
    same_high = float(np.quantile(same, 1 - MARGIN))
    apart = np.asarray(different)[np.asarray(different) > same_high]  # the people appearance tells apart
    if not len(apart):
        return round(same_high, 4)
    return round((same_high + float(np.quantile(apart, MARGIN))) / 2, 4)


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
