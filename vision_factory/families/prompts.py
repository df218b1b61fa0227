"""Prompts as inputs, without ROS: what a family declares it takes besides images (its Family record's
``prompts``), and how a text prompt is read and checked.

- ``TextPrompt``: phrases separated by " . " (as Grounding DINO's processor joins them: "a person . a forklift"),
  the family's node parameter ``prompt`` (its value at start, and set at run time), taken on a running node from
  the ``~/set_prompt`` service and the ``~/prompt`` topic too (ros/node_prompts.py), applied from the next frame;
  the tools take it as ``--prompt``. A family derives what it needs from it (tokens, text embeddings) when its
  adapter is built, so once per prompt: the node builds the adapter again only when the prompt changes.
- ``BoxesPrompt``: boxes (with class and id) from another node's vision_msgs/Detection2DArray topic, paired with
  the image of the same stamp (ros/node_inputs.py); ``classes`` names the parameter that keeps only some classes of
  them; ``run(detector, frame, boxes)`` gives them to the family's adapter (rtmpose: the people it poses; sam: the
  boxes it segments, ``ids``: each with its Detection2D.id).
- ``PointsPrompt``: boxes and points drawn on the image, as text (sam: 'x1,y1,x2,y2' boxes and 'x,y,label' points,
  separated by ';', predict's --boxes and --points syntax read by the family's own ``parse``), taken as a text
  prompt is (the ``prompt`` parameter, ~/set_prompt, ~/prompt); ``answers_last_frame``: a change is answered at
  once on the last frame the node answered (its cached work reused), then on each new frame until changed.

Prompt text is untrusted: at most MAX_PROMPT_CHARS characters, no control characters, and each family's own limits
(``max_phrases``); a prompt that breaks one is refused with a PromptError naming the kind of problem and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..parameters import LIVE, Parameter
from ..results.frame import FrameResult
from ..text import untrusted

MAX_PROMPT_CHARS = 2000  # a prompt longer than this is refused: memory and logs stay bounded
SEPARATOR = " . "  # how the phrases of a text prompt are joined (Grounding DINO's processor)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class PromptError(ValueError):
    """A prompt refused: ``kind`` a short fixed name of the problem (logged once per kind), the message the
    reason and the fix."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class TextPrompt:
    """A text prompt: phrases, each a class of the family's answers (its index the class id, the phrase its
    name)."""

    about: str  # what the phrases are, in words, for `vision-factory models` and the generated README
    default: str = ""  # the prompt at start when none is given; "": none (the node answers nothing until one comes)
    max_phrases: int = 0  # the most phrases the model takes; 0: no limit of its own

    kind = "text"
    answers_last_frame = False  # a change applies from the next frame (a PointsPrompt's is answered on the last)

    @property
    def parameter(self) -> Parameter:
        """The node parameter holding the prompt (live: set on a running node, it applies from the next frame)."""
        return Parameter(
            "prompt",
            self.default,
            f"{self.about}: phrases separated by ' . ', e.g. 'a person . a forklift'; also set on a running node "
            "by the ~/set_prompt service and the ~/prompt topic",
            launch_argument=True,
            applies=LIVE,
        )

    @property
    def description(self) -> str:
        """One line for `vision-factory models` and the generated README."""
        return (
            f"text ({self.about}): the prompt parameter, ~/set_prompt (vision_factory_interfaces/srv/SetPrompt) "
            "and ~/prompt (std_msgs/String), applied from the next frame"
        )

    def phrases(self, text: str) -> list[str]:
        """The phrases of prompt ``text`` (checked: ``check``), in order."""
        self.check(text)
        return phrases(text)

    def check(self, text: str) -> str:
        """``text`` when it is a prompt this family takes, else a PromptError naming the problem and the fix."""
        plain(text, "phrases")
        count = len(phrases(text))
        if self.max_phrases and count > self.max_phrases:
            raise PromptError(
                "too many phrases",
                f"the prompt names {count} phrases, the model takes at most {self.max_phrases}: give fewer",
            )
        return text


@dataclass(frozen=True)
class PointsPrompt:
    """Boxes and points on the image, as text, taken on the node as a text prompt is: each box or group of points a
    prompt of its own (sam: a mask each)."""

    about: str  # what the prompts do, in words, for `vision-factory models` and the generated README
    parse: Callable[[str], Any]  # the family's reader of the text (predict's): ValueError naming the part that is wrong

    kind = "points"
    answers_last_frame = True  # a change is answered at once on the last frame answered, not only from the next

    @property
    def parameter(self) -> Parameter:
        """The node parameter holding the prompt (live: a change is answered on the last frame, then on each new
        one)."""
        return Parameter(
            "prompt",
            "",
            f"{self.about}: boxes 'x1,y1,x2,y2' and points 'x,y,label' (label 1 on the object, 0 off it; '+' joins "
            "the points of one prompt) in image pixels, separated by ';', e.g. '40,30,200,220;310,120,1+330,90,0'; "
            "empty: none; also set on a running node by the ~/set_prompt service and the ~/prompt topic",
            launch_argument=True,
            applies=LIVE,
        )

    @property
    def description(self) -> str:
        """One line for `vision-factory models` and the generated README."""
        return (
            f"boxes and points ({self.about}): the prompt parameter, ~/set_prompt "
            "(vision_factory_interfaces/srv/SetPrompt) and ~/prompt (std_msgs/String), answered at once on the last "
            "frame, then on each new frame until an empty prompt clears it"
        )

    def check(self, text: str) -> str:
        """``text`` when the family reads prompts of it, else a PromptError naming the problem and the fix."""
        plain(text, "prompts")
        try:
            self.parse(text)
        except ValueError as exc:  # the reader's reason, the text quoted escaped and length-limited
            raise PromptError("prompt not read", str(exc)) from None
        return text


@dataclass(frozen=True)
class BoxesPrompt:
    """Boxes from another node (with class and id), paired with the image by stamp: the family's paired input
    (NodeWiring.paired) when it subscribes to it."""

    what: str  # what the boxes are, in words ("person detections"): an image without them is "image without <what>"
    use: str  # what the node does with them, in words ("posing the people"), for its log
    run: Callable[[Any, Any, FrameResult], FrameResult]  # (adapter, frame, boxes) -> the frame's result
    classes: str = ""  # the parameter naming the one class of the boxes kept (by name); "": every box
    ids: bool = False  # each box's Detection2D.id travels with it (as its track ID; sam: to its mask); else a rank

    kind = "boxes"

    def kept(self, boxes: FrameResult, values: Any) -> FrameResult:
        """The rows of ``boxes`` (another node's detections, results/frame.py) of the class the ``classes``
        parameter names, or all."""
        wanted = values.get(self.classes, "") if self.classes else ""
        if not wanted or boxes.boxes is None:
            return boxes
        return boxes[np.array([label == wanted for label in boxes.boxes.labels], bool)]


def plain(text: str, what: str) -> str:
    """``text`` when it is of bounded length and plain (no control characters), else a PromptError saying which
    (``what``: what to give fewer of)."""
    if len(text) > MAX_PROMPT_CHARS:
        raise PromptError(
            "prompt too long", f"the prompt has {len(text)} characters, over {MAX_PROMPT_CHARS}: give fewer {what}"
        )
    if _CONTROL.search(text):
        raise PromptError(
            "prompt with control characters",
            f"the prompt '{untrusted(text, 100)}' holds control characters: give plain text {what}",
        )
    return text


def phrases(text: str) -> list[str]:
    """The phrases of a text prompt: separated by '.', each stripped, empty ones left out ('a cat. a dog .' ->
    ['a cat', 'a dog'])."""
    return [phrase.strip() for phrase in text.split(".") if phrase.strip()]
