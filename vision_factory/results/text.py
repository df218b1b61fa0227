"""The text of a frame (``Text``: a caption, or a model's answer to a task prompt, e.g. Florence-2's, with its
score), its file record and its message.

Its message is vision_msgs/Classification (header, results: ObjectHypothesis[]): the one result's class_id the text,
its score the text's. A stamped message of vision_msgs, which every ROS 2 distribution ships and
``vision-factory install-vision-msgs`` builds (interfaces/vision_msgs): a user reads it with the tools they have,
and its header pairs the text with its image as every other result's does (std_msgs/String carries no header)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..text import untrusted
from .part import Compared

if TYPE_CHECKING:
    from std_msgs.msg import Header
    from vision_msgs.msg import Classification

MESSAGE = "vision_msgs/msg/Classification"
TEXT_COLOUR = (255, 255, 255)  # BGR, on a dark band


@dataclass(frozen=True)
class Text:
    """A frame's text and how sure the model is of it (0..1; 1 when it does not say); the token ids a generating
    model (Florence-2) made it from, where it says (in the file record; its message carries the text)."""

    key: ClassVar[str] = "text"

    text: str
    score: float = 1.0
    tokens: tuple[int, ...] = ()

    def record(self) -> dict[str, Any]:
        made: dict[str, Any] = {"text": self.text, "score": self.score}
        if self.tokens:
            made["tokens"] = [int(token) for token in self.tokens]
        return made

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Text:
        tokens = tuple(int(token) for token in record.get("tokens", ()))
        return cls(str(record["text"]), float(record.get("score", 1.0)), tokens)

    def describe(self) -> str:
        return untrusted(self.text, 400)

    def rows(self) -> Compared:
        """The text as compared: its label (texts that differ never pair), its score."""
        return Compared([self.text], [np.zeros(0)], np.array([self.score]), [np.zeros(0)])

    def to_message(self, header: Header, frame: Any = None) -> Classification:
        from vision_msgs.msg import Classification, ObjectHypothesis

        return Classification(header=header, results=[ObjectHypothesis(class_id=self.text, score=float(self.score))])

    @classmethod
    def from_message(cls, message: Classification) -> Text:
        """A Classification's first result as a text ('' with score 0 when it has none)."""
        if not message.results:
            return cls("", 0.0)
        return cls(message.results[0].class_id, float(message.results[0].score))

    def draw(self, image: np.ndarray, frame: Any = None) -> np.ndarray:
        """The text (escaped, cut to the image's width) on a dark band at the top of the image."""
        import cv2

        shown = untrusted(self.text, 200)
        cv2.rectangle(image, (0, 0), (image.shape[1], 18), (0, 0, 0), -1)
        cv2.putText(image, shown, (4, 13), cv2.FONT_HERSHEY_SIMPLEX, 0.45, TEXT_COLOUR, 1, cv2.LINE_AA)
        return image
