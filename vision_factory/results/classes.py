"""A frame's classification (``Classes``: an image classifier's best classes, best first, with their scores), its
file record, its comparison, its drawing and its message.

Its message is vision_msgs/Classification (header, results: ObjectHypothesis[]): one hypothesis per class listed,
best first, ``class_id`` the class name and ``score`` its probability (0..1), as Ultralytics' ``Probs.top5`` lists
them; the class map travels once in the node's LabelInfo, as a detector's does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..text import untrusted
from .colours import class_colour
from .part import Compared, Equal

if TYPE_CHECKING:
    from std_msgs.msg import Header
    from vision_msgs.msg import Classification

TOP = 5  # classes listed per frame by default: Ultralytics' top5


@dataclass(frozen=True, eq=False)
class Classes(Equal):
    """A frame's best classes, best first: ``class_ids`` [K] (-1: not in the class map), ``scores`` [K] in 0..1,
    ``labels`` each one's name, ``names`` the class map where known."""

    key: ClassVar[str] = "classes"

    class_ids: np.ndarray
    scores: np.ndarray
    labels: tuple[str, ...]
    names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "class_ids", np.asarray(self.class_ids, np.int64).reshape(-1))
        set_(self, "scores", np.asarray(self.scores, np.float64).reshape(-1))
        set_(self, "labels", tuple(self.labels))
        set_(self, "names", None if self.names is None else tuple(self.names))
        if not len(self.class_ids) == len(self.scores) == len(self.labels):
            raise ValueError(
                f"Classes of unequal rows: {len(self.class_ids)} class ids, {len(self.scores)} scores, "
                f"{len(self.labels)} labels"
            )

    @classmethod
    def of(
        cls, probabilities: Any, names: Sequence[str], top: int = TOP, wanted: Sequence[int] | None = None
    ) -> Classes:
        """The ``top`` classes of ``probabilities`` [C] (of those ``wanted``; None: all), best first (ties: lower
        id first), named by the class map ``names`` (an id past it: class_<id>); a NaN probability is never best."""
        values = np.asarray(probabilities, np.float64).reshape(-1)
        ids = np.arange(len(values)) if wanted is None else np.asarray([i for i in wanted if 0 <= i < len(values)])
        ids = ids.astype(np.int64)
        order = ids[np.argsort(-np.nan_to_num(values[ids], nan=-np.inf), kind="stable")][: max(top, 0)]
        labels = [names[i] if i < len(names) else f"class_{i}" for i in order.tolist()]
        return cls(order, values[order], labels, names)

    def __len__(self) -> int:
        return len(self.scores)

    @property
    def best(self) -> str:
        """The best class's name; '' when none is listed."""
        return self.labels[0] if self.labels else ""

    def record(self) -> dict[str, Any]:
        rows = zip(self.class_ids.tolist(), self.labels, self.scores.tolist())
        return {"classes": [{"class_id": i, "class_name": label, "score": score} for i, label, score in rows]}

    @classmethod
    def from_record(cls, record: Mapping[str, Any], names: Sequence[str] | None = None) -> Classes:
        rows = record["classes"]
        return cls([r["class_id"] for r in rows], [r["score"] for r in rows], [r["class_name"] for r in rows], names)

    def describe(self) -> str:
        """Each class listed and its score, best first (the names come from the model or a labels file: escaped)."""
        return ", ".join(f"{untrusted(label, 100)} {score:.2f}" for label, score in zip(self.labels, self.scores))

    def rows(self) -> Compared:
        """Each class listed as a row: its label (rows pair within a label), its score; no positions."""
        none = [np.zeros(0)] * len(self)
        return Compared(list(self.labels), list(none), self.scores, list(none))

    def to_message(self, header: Header, frame: Any = None) -> Classification:
        from vision_msgs.msg import Classification, ObjectHypothesis

        results = [ObjectHypothesis(class_id=label, score=float(s)) for label, s in zip(self.labels, self.scores)]
        return Classification(header=header, results=results)

    @classmethod
    def from_message(cls, message: Classification, names: Sequence[str] = ()) -> Classes:
        """A Classification's hypotheses, in its order: a class id is its name's index in ``names`` (the node's
        LabelInfo), -1 when not there."""
        index: dict[str, int] = {}
        for class_id, name in enumerate(names):
            index.setdefault(name, class_id)
        labels = [item.class_id for item in message.results]
        scores = [item.score for item in message.results]
        return cls([index.get(label, -1) for label in labels], scores, labels, tuple(names) or None)

    def draw(self, image: np.ndarray, frame: Any = None) -> np.ndarray:
        """The classes listed, best first, one label a line from the top-left corner, each on its class's colour."""
        from .drawing import draw_label, label_size

        top = 0
        for class_id, label, score in zip(self.class_ids.tolist(), self.labels, self.scores.tolist()):
            text = f"{untrusted(label, 40)} {score:.2f}"
            width, height = label_size(text)
            if top + height > image.shape[0]:
                break
            draw_label(image, (0, top, min(width, image.shape[1]), top + height), text, class_colour(class_id))
            top += height
        return image
