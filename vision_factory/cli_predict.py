"""vision-factory's commands on images and videos without ROS: predict, track and reid-tune. Option tables and
calls, as cli.py's; cli.py adds COMMANDS."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from .cli_support import (
    ANY_PATH,
    BACKEND,
    EXISTING,
    FILE,
    FOLDER,
    FORMAT,
    MODEL,
    PROGRESS,
    PROMPT_OPTIONS,
    TASK,
    force_option,
    model_type_option,
    option,
    options,
    out_option,
    parameter_option,
    prompt_options,
    task_prompt,
)
from .cli_support import echo as _echo
from .cli_support import progress_bars as _progress_bars
from .cli_support import reported as _reported
from .cli_support import show as _show
from .cli_support import warn as _warn
from .families.registry import DETECTORS, MAPS, SINGLE_MODEL_DETECTORS
from .models.depth import RESIZES as DEPTH_RESIZE_FILTERS

# The detector's options of predict and track: (option, click type, help, help where rtmpose is a choice or
# None: the same); the node parameter each sets is tools/predict.py's FINDING / POSING, left None here so that the
# tool gives each family its node's default. track takes no rtmpose.
DETECTOR_OPTIONS = (
    ("--conf", float, "confidence threshold  [default: the nodes']", None),
    ("--iou", float, "NMS IoU threshold (yolo)  [default: the nodes']", None),
    ("--max-det", int, "detections per image at most  [default: the nodes']", None),
    ("--classes", str, "class ids or names to keep, e.g. 0,2 or person,car  [default: all]", None),
    ("--imgsz", int, "input size for yolo models with dynamic input  [default: the size recorded in the model, as "
     "the nodes]", None),
    ("--labels", click.Path(exists=True, dir_okay=False), "class names, one per line, when the model's metadata has "
     "none", "class names, one per line, when the model's metadata has none (rtmpose: the detector's)"),
    ("--input-size", str, "fasterrcnn: WIDTHxHEIGHT for a model with dynamic input size",
     "fasterrcnn / rtmpose: WIDTHxHEIGHT for a model with dynamic input size"),
    ("--resize", click.Choice(["stretch", "letterbox", "none"]), "fasterrcnn: fit frames by", None),
    ("--box-units", click.Choice(["auto", "normalized", "pixels"]), "fasterrcnn: boxes are in", None),
    ("--label-offset", int, "fasterrcnn: the label of class 0 (default 1: 0 is the background)", None),
    ("--score-function", click.Choice(["auto", "sigmoid", "softmax"]), "detr logits + pred_boxes models: sigmoid "
     "(RT-DETR, D-FINE) or softmax (DETR)  [default: auto, as the model says]", None),
    *((flag, kind, help_text, None) for flag, kind, help_text in PROMPT_OPTIONS if flag != "--decoder"),
    ("--max-new-tokens", int, "florence2: the most tokens generated a frame  [default: the nodes']", None),
    ("--num-beams", int, "florence2: beams of transformers' beam search, 1 greedy  [default: the export's "
     "generation_config.json's, as transformers' generate()]", None),
)  # fmt: skip


METAVARS = {"--reid": "REID.onnx"}


def _detector_options(rtmpose: bool) -> Callable:
    """DETECTOR_OPTIONS, each passed to the command under its node parameter's name (None: not given), described
    for a command that takes rtmpose (predict) or not (track)."""
    from .tools.predict import FINDING, POSING

    names = FINDING | POSING
    return options(
        *(
            option(flag, names[flag], type=kind, help=(rtmpose_help or help_text) if rtmpose else help_text)
            for flag, kind, help_text, rtmpose_help in DETECTOR_OPTIONS
        )
    )


def _given_detector_options(values: dict) -> dict:
    """The command's DETECTOR_OPTIONS values by option (as tools/predict.py takes them)."""
    from .tools.predict import FINDING, POSING

    names = FINDING | POSING
    return {flag: values[names[flag]] for flag, *_ in DETECTOR_OPTIONS}


@click.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@options(
    model_type_option((*DETECTORS, *MAPS), required=True),
    option("--model", type=MODEL, required=True,
           help="ONNX model (florence2: the export's folder)"),
    BACKEND,
    _detector_options(rtmpose=True),
    TASK,
    option("--depth-kind", type=click.Choice(["metric", "relative"]),
           help="depth: metric (metres) or relative, for a model whose file does not say"),
    option("--processor-size", help="depth: the image processor's size WIDTHxHEIGHT  [default: the model's]"),
    option("--max-depth", type=float, help="depth: metres beyond which depth is invalid (NaN)"),
    option("--resize-filter", type=click.Choice(DEPTH_RESIZE_FILTERS),
           help=f"depth: exact (the processor's own filter) or fast (OpenCV's)  [default: {DEPTH_RESIZE_FILTERS[0]}]"),
    option("--detector", "detector_model", type=FILE, help="rtmpose: the person detector's model"),
    option("--detector-type", type=click.Choice(list(SINGLE_MODEL_DETECTORS)), default="yolo", show_default=True,
           help="rtmpose: the person detector's family"),
    option("--person-class", help="rtmpose: the detector's person class, name or id (default: 'person', else all)"),
    prompt_options("--decoder"),
    option("--boxes", help="sam: boxes to segment on every frame, x1,y1,x2,y2;... (frame pixels)"),
    option("--points", help="sam: point prompts, x,y,label;... (label 1 on the object, 0 off it; a prompt's "
           "several points joined by +: x,y,1+x,y,0)"),
    FORMAT,
    option("--save", type=FOLDER, help="folder for annotated images"),
)  # fmt: skip
def predict(inputs: tuple[Path, ...], model: Path, person_class: str | None, save: Path | None, **given: Any) -> None:
    """Detections (and keypoints) of a model on images or videos; a depth model's maps.

    yolo / yolo_pose are pre-processed as Ultralytics does; fasterrcnn (boxes, scores and labels
    outputs, NMS inside) gets the frame resized to its input, RGB, 0..1; rtmpose estimates the
    pose of each person that --detector finds (top-down, MMPose's crop and SimCC decoding); sam
    segments the --boxes and --points prompts, each mask a detection (box tight to the mask,
    score the predicted IoU, class 'box N' or 'points N' by its place).

    JSON: one record per line per image (or video frame, as PATH:FRAME) with frame (the
    index in its video, 0 for an image), width, height and detections [{xyxy, score,
    class_id, class_name, keypoints}] in image pixels; `replay` writes the same records. A depth
    model's record: kind, unit (m, or relative) and the map's valid pixels, min, max and mean;
    --save writes each map as .npy (float32, NaN invalid), a 16-bit millimetre .png (metric: 0
    invalid) and a colour-mapped .png.

    \b
    Examples:
      vision-factory predict --model-type yolo --model yolov8n.onnx bus.jpg --format json
      vision-factory predict --model-type yolo_pose --model yolo11n-pose.onnx clip.mp4 --save annotated/
      vision-factory predict --model-type fasterrcnn --model ssd_mobilenet.onnx street.jpg --labels coco.txt
      vision-factory predict --model-type rtmpose --model rtmpose-m.onnx --detector yolov8n.onnx people.jpg
      vision-factory predict --model-type depth --model depth_anything_v2_small.onnx --depth-kind relative room.jpg
      vision-factory predict --model-type open_vocab --model grounding-dino.onnx --prompt 'a cat . a remote' cats.jpg
      vision-factory predict --model-type sam --model vision_encoder.onnx --boxes "40,30,200,220" cat.jpg
      vision-factory predict --model-type florence2 --model Florence-2-base/ --task '<OD>' street.jpg --format json
    """
    from .streaming import ProblemLog
    from .text import untrusted
    from .tools.predict import MAPPING, detector_from_options
    from .tools.predict import predict as run_predict

    options = {**_given_detector_options(given), "--person-class": person_class}
    options["--prompt"] = task_prompt(given, options["--prompt"])  # florence2: the task (and its text) is its prompt
    options.update({flag: given[flag[2:]] for flag in ("--boxes", "--points")})
    options["--decoder"] = given["decoder_path"]
    options.update({flag: given[name] for flag, name in MAPPING.items()})
    detector_model, json_lines = given["detector_model"], given["output_format"] == "json"
    with _reported():
        detector = detector_from_options(
            given["model_type"], model, given["target"], options, detector_model, given["detector_type"]
        )
        protected = [
            model,
            detector_model,
            options.get("--labels"),
            options.get("--tokenizer"),
            options.get("--text-encoder"),
            options.get("--decoder"),
        ]
        head_note = getattr(detector, "head_note", None)  # e.g. YOLO's end-to-end head: no NMS
        if head_note:
            _echo(head_note, err=True)
        problems = ProblemLog(0)  # what was wrong with the model's output: each kind said once, counted at the end
        for found in run_predict(detector, inputs, save, protected):
            for problem, detail in found.problems.items():
                _warn(problems.count(problem, f"frame {untrusted(found.record['image'], 400)}", detail, False))
            click.echo(json.dumps(found.record) if json_lines else found.line())
        _warn(problems.summary(final=True))


def _tracking_options() -> Callable:
    """One option per tracking parameter (families/tracking.py; tools/track.py's TRACKING names them), with the
    parameter's default and description."""
    from .tools.track import TRACKING

    return options(
        *(
            parameter_option(name, flag, suffix=f" ({name})", metavar=METAVARS.get(flag))
            for flag, name in TRACKING.items()
        )
    )


@click.command()
@click.argument("sources", nargs=-1, type=EXISTING)
@options(
    model_type_option(SINGLE_MODEL_DETECTORS, "the detector's family", required=True),
    option("--model", type=MODEL, required=True, help="detector (ONNX)"),
    BACKEND,
    _detector_options(rtmpose=False),
    _tracking_options(),
    out_option("folder"),
    option("--save", is_flag=True, help="also write OUT/tracks.mp4, each box labelled with its track ID"),
    option("--camera", "cameras", multiple=True, metavar="NAME=SOURCE",
           help="camera NAME and its frames' SOURCE (a video, rosbag2 or image), repeatable: several cameras, each "
           "tracked on its own (IDs per camera), its tracks in OUT/NAME/"),
    force_option(),
    PROGRESS,
)  # fmt: skip
def track(sources: tuple[Path, ...], model_type: str, model: Path, target: str, **given: Any) -> None:
    """Track a detector's boxes over a stream: image files (in the order given), one video or one rosbag2.

    The detector is built as `predict` builds it, the tracker as a node with `tracking: true`
    (the --track-* and --reid* options are its parameters; --reid REID.onnx adds appearance
    re-identification, else motion only). Writes OUT/tracks.txt in MOTChallenge format, one
    line per box with a track ID: frame (from 1), id, x, y (top-left), w, h, score, -1, -1, -1;
    with --save, OUT/tracks.mp4. Score it with `vision-factory eval --model-type track`.

    \b
    Examples:
      vision-factory track --model-type yolo --model yolov8n.onnx street.mp4 --out runs/street --save
      vision-factory track --model-type yolo --model yolov8n.onnx --classes person \\
          --reid mobilenetv2-reid-embedder.onnx frames/*.jpg --out runs/frames
      vision-factory track --model-type yolo --model yolov8n.onnx --out runs/rig \\
          --camera front=front.mp4 --camera left=left_bag
    """
    from .tools.track import TRACKING
    from .tools.track import track as run_track

    detector_options = _given_detector_options(given)
    tracking_options = {flag: given[name] for flag, name in TRACKING.items()}
    if bool(sources) == bool(given["cameras"]):
        raise click.UsageError("give the frames: SOURCES (one stream) or --camera NAME=SOURCE (several), not both")
    if given["cameras"]:
        _track_cameras(model_type, model, target, given, detector_options, tracking_options)
        return
    with _reported(FileExistsError):
        result = run_track(model_type, model, target, sources, given["out_dir"], detector_options, tracking_options,
                           given["save"], given["force"], _progress_bars())  # fmt: skip
    click.echo(json.dumps(result.summary(), indent=2))


def _track_cameras(model_type, model, target, given, detector_options, tracking_options) -> None:
    """track --camera: each camera's source tracked on its own (tools/track.py's track_cameras)."""
    from .tools.track import parse_camera_sources, track_cameras

    with _reported(FileExistsError):
        cameras = parse_camera_sources(given["cameras"])
        runs = track_cameras(model_type, model, target, cameras, given["out_dir"], detector_options,
                             tracking_options, given["save"], given["force"])  # fmt: skip
    click.echo(json.dumps({"cameras": {name: run.summary() for name, run in runs.items()}}, indent=2))


@click.command("reid-tune")
@options(
    option("--model", type=MODEL, required=True, help="re-id model (ONNX)"),
    option("--frames", "source", type=ANY_PATH, required=True,
           help="the frames of the truth: a folder of images (in name order), a video or a rosbag2"),
    option("--truth", type=FILE, required=True,
           help="MOTChallenge ground truth of the people in them (gt.txt: frame,id,x,y,w,h,...; frames from 1)"),
    out_option("the tuned copy: NAME.onnx", kind=FILE, dest="out"),
    BACKEND,
    parameter_option("reid_input_size", "--input-size", "input_size"),
)  # fmt: skip
def reid_tune(**given: Any) -> None:
    """The tracker's appearance thresholds for one re-id model, measured on your frames.

    Embeds every person of the ground truth as the tracker does, measures the appearance
    distance (1 - cos) / 2 of each crop to the same person's running feature and to other
    people's, prints both distributions and chooses track_appearance_threshold,
    track_appearance_veto and track_reentry_threshold (warning when the two overlap). Writes a
    copy of the model with them in its metadata (`inspect` shows them); nodes and `track`
    take them from there while track_thresholds_from_model is true.

    \b
    Example:
      vision-factory reid-tune --model mobilenetv2-reid-embedder.onnx --frames frames/ \\
          --truth gt.txt --out mobilenetv2-reid-tuned.onnx
    """
    from .tools.reid_tune import tune

    with _reported():
        _show(tune(**given, log=lambda text: _echo(text, err=True)))


COMMANDS = (
    predict,
    track,
    reid_tune,
)
