"""vision-factory's measuring commands: bench, eval, compare and quantize. Option tables and calls, as cli.py's;
cli.py adds COMMANDS."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .cli_support import (
    ANY_PATH,
    BACKEND,
    FILE,
    FOLDER,
    MODEL,
    PROGRESS,
    STRIDE,
    TASK,
    given_prompt_options,
    model_type_option,
    option,
    options,
    out_option,
    parameter_option,
    prompt_options,
    task_prompt,
    tool_option,
)
from .cli_support import echo as _echo
from .cli_support import progress_bars as _progress_bars
from .cli_support import reported as _reported
from .cli_support import show as _show
from .families.registry import FAMILIES, SINGLE_MODEL
from .parameters import MAX_CAMERAS
from .runtime.backends import BENCH_TARGETS
from .tools.ball_eval import evaluate_tracking
from .tools.eval_details import WORST_IMAGES
from .tools.mot import MODEL_TYPE as TRACK
from .tools.quantize import BACKENDS as QUANTIZE_BACKENDS
from .tools.quantize import METHODS, PRECISIONS, QUANTIZE_TYPES, REFUSED_TYPES, TARGET_CPUS
from .tools.quantize import quantize as run_quantize

# eval's model types: the families whose result kind it scores (ball CSVs, COCO detections), and MOTChallenge tracks.
EVAL_TYPES = (*(name for name, spec in FAMILIES.items() if spec.result and spec.result.metrics), TRACK)


_LOSSES = {FAMILIES[name].accuracy_loss: [] for name in QUANTIZE_TYPES}  # each family's, those sharing one together
for _name in QUANTIZE_TYPES:
    _LOSSES[FAMILIES[_name].accuracy_loss].append(_name)
MAX_LOSS_DEFAULT = "; ".join(f"{', '.join(names)}: {loss.what} {loss.default:g}" for loss, names in _LOSSES.items())


def _prompt_options(model_type: str, given: dict) -> dict:
    """The prompt options given (cli_support.py's prompt_options), by option; one the family has no parameter for
    refused, naming it (a UsageError)."""
    from .tools.commands import UsageError
    from .tools.predict import PROMPTED, taken_options

    prompts = given_prompt_options(given)
    if model_type in FAMILIES:
        taken_options(model_type, prompts, PROMPTED)
    elif any(value is not None for value in prompts.values()):
        raise UsageError(f"{model_type} takes no prompt options")
    return prompts


@click.command()
@click.argument("model", type=MODEL)
@options(
    option("--backends", "targets", default=BENCH_TARGETS, show_default=True,
           help="backend[:provider|device|precision], comma-separated"),
    option("--runs", type=click.IntRange(min=1), default=100, show_default=True,
           help="timed runs per backend, after the warm-up"),
    option("--warmup", type=click.IntRange(min=0), default=10, show_default=True, help="untimed runs first"),
    model_type_option(SINGLE_MODEL, "also time the family's whole per-frame pipeline"),
    option("--node", is_flag=True,
           help="also replay 1280x720 frames over DDS through the family's ROS node on each target: this package's "
           "node for onnx, a generated package's for the others (needs --model-type)"),
    parameter_option("stride", prefix="tracknet: ", suffix=", in the pipeline and the node", type=STRIDE),
    option("--cameras", type=click.IntRange(min=2, max=MAX_CAMERAS),
           help="with --node: also N cameras (cam0 .. camN-1, 1280x720 at 15 Hz each) through one node (its cameras "
           "parameter) against N nodes of one camera each (frames/s, latency per camera, memory), on onnx:cpu"),
    prompt_options(prefix="with --model-type: "),
    TASK,
    out_option("folder for bench.json and bench.png", "vision_factory_bench"),
    PROGRESS,
)  # fmt: skip
def bench(**given: Any) -> None:
    """Load time, first inference, latency p50/p90/p99, throughput and peak memory per backend.

    Each backend runs in its own process; one that cannot run here is listed with the reason.
    Writes a table to the terminal, OUT/bench.json and a latency plot OUT/bench.png.

    \b
    Examples:
      vision-factory bench model.onnx --backends onnx:cpu,openvino:CPU
      vision-factory bench tracknet.onnx --model-type tracknet --node --runs 200
      vision-factory bench yolov8n.onnx --model-type yolo --node --backends onnx:cpu,openvino:CPU
      vision-factory bench yolov8n.onnx --model-type yolo --node --backends onnx:cpu --cameras 4
      vision-factory bench grounding-dino.onnx --model-type open_vocab --prompt 'a person . a tie'
      vision-factory bench sam/vision_encoder.onnx --model-type sam --decoder sam/prompt_encoder_mask_decoder.onnx

    A prompted family's model runs on its prompt's inputs: open_vocab's text side (the prompt's encoding) is
    timed apart from the image side (default prompt: 'a person . a tie'); sam's encoder apart from its decoder,
    4 boxes a frame.
    """
    from .tools.bench import bench as run_bench

    with _reported():
        given["prompts"] = given_prompt_options(given)
        given["prompts"]["--prompt"] = task_prompt(given, given["prompts"]["--prompt"])
        _show(run_bench(**given, log=lambda text: _echo(text, err=True), progress=_progress_bars()))


@click.command(name="eval")
@options(
    model_type_option(EVAL_TYPES, f"model family, or {TRACK} for MOTChallenge tracks", required=True),
    option("--data", type=ANY_PATH, required=True,
           help="truth: a CSV (Frame,Visibility,X,Y) for tracknet; a COCO JSON or a folder with annotations.json and "
           f"images/; MOTChallenge gt.txt for {TRACK}"),
    option("--predictions", type=ANY_PATH,
           help=f"predictions to score: a ball CSV, a COCO results JSON, MOTChallenge tracks.txt ({TRACK}), or a "
           "folder of maps (.npy, as predict --save writes them: depth)"),
    option("--frame-size", help="WIDTHxHEIGHT of the frames, needed with --predictions"),
    option("--model", type=MODEL, help="model to run over --source"),
    option("--source", type=ANY_PATH, help="rosbag2 or video the model runs over"),
    BACKEND,
    parameter_option("median_warmup"),
    parameter_option("heatmap_threshold"),
    tool_option("--tolerance", evaluate_tracking, "tolerance", help="TP distance in 512x288 pixels"),
    parameter_option("stride", prefix="tracknet --model: ", type=STRIDE),
    option("--inpaint-model", type=FILE,
           help="tracknet --model: InpaintNet model repairing its track, as the node's inpaint_model_path (the "
           "precision-recall curve stays TrackNet's)"),
    prompt_options(prefix="with --model: "),
    option("--worst", type=click.IntRange(0, 100), default=WORST_IMAGES, show_default=True,
           help="COCO detections and poses: the images with the most missed and false detections drawn into "
           "OUT/worst_images/ (0: none)"),
    out_option("folder for eval.json and eval.md (also pr_curve.png; tracknet: trajectory.png; COCO: worst_images/, "
               "a --model's predictions.json)", "vision_factory_eval"),
    PROGRESS,
)  # fmt: skip
def evaluate_command(
    model_type: str,
    data: Path,
    predictions: Path | None,
    frame_size: str | None,
    model: Path | None,
    source: Path | None,
    target: str,
    median_warmup: int,
    heatmap_threshold: float,
    tolerance: float,
    stride: int,
    inpaint_model: Path | None,
    worst: int,
    out_dir: Path,
    **prompts: Any,
) -> None:
    """Score ball tracking with TrackNet's metrics: accuracy, precision, recall, F1 (TP/FP1/FP2/FN/TN).

    Either a predictions CSV (with --frame-size), or --model run over --source (a bag or a
    video), which also sweeps the heatmap threshold for a precision-recall curve. Writes
    OUT/eval.json, OUT/eval.md, OUT/trajectory.png (and OUT/pr_curve.png).

    Detection and pose: a COCO results file (--predictions), or a yolo / yolo_pose / fasterrcnn
    --model run over the data set, scored against COCO annotations (--data: the JSON or a folder with
    annotations.json and images/) with pycocotools: AP, AP50, AP75, AR100 (keypoints: OKS AP, AR20), the
    same per class, a precision-recall curve per class (OUT/pr_curve.png) and the --worst images drawn, truth
    dashed and detections solid (OUT/worst_images/).

    Tracks (--model-type track): a MOTChallenge tracks file against MOTChallenge ground truth: HOTA (DetA,
    AssA), MOTA, MOTP, IDF1, ID switches, mostly tracked / partially tracked / mostly lost.

    Open-vocabulary detection (open_vocab --model): prompted with the data set's category names, a phrase
    each, unless --prompt is given; each detection's phrase maps back to the category of that name (a
    prompt naming no category: its phrases to the categories in order).

    Depth: the maps predict --save wrote (--predictions FOLDER) against truth maps of the same names
    (--data FOLDER of .npy in metres): AbsRel, RMSE and delta1 (max(p/t, t/p) < 1.25) over the pixels
    with truth, per image, then averaged over the images.

    \b
    Examples:
      vision-factory eval --model-type tracknet --data truth.csv --predictions ball.csv --frame-size 1280x720
      vision-factory eval --model-type tracknet --data truth.csv --model TrackNet.onnx --source rally.mp4
      vision-factory eval --model-type yolo --data instances_val.json --predictions results.json
      vision-factory eval --model-type open_vocab --data coco_val/ --model grounding-dino.onnx
      vision-factory eval --model-type track --data MOT17-02/gt/gt.txt --predictions runs/tracks.txt
    """
    from .tools.evaluation import family_evaluation
    from .tools.mot import evaluate_tracks

    options = {"data": data, "out_dir": out_dir, "predictions": predictions, "frame_size": frame_size, "model": model}
    options |= {"source": source, "target": target, "median_warmup": median_warmup, "tolerance": tolerance}
    options |= {"heatmap_threshold": heatmap_threshold, "stride": stride, "inpaint_model": inpaint_model}
    options |= {"worst": worst, "progress": _progress_bars()}
    with _reported():
        options["prompts"] = _prompt_options(model_type, prompts)
        if model_type == TRACK:
            _show(evaluate_tracks(data, predictions, out_dir))
        else:  # the family's result kind scores it (tools/evaluation.py)
            _show(family_evaluation(FAMILIES[model_type]).evaluate(model_type, options))


@click.command()
@options(
    model_type_option(SINGLE_MODEL, required=True),
    option("--model", type=MODEL, required=True, help="model of configuration A"),
    option("--model-b", type=MODEL, help="model of B (default: --model)"),
    option("--a", "target_a", default="onnx:cpu", show_default=True, help="backend of A, as in bench"),
    option("--b", "target_b", default="openvino:CPU", show_default=True, help="backend of B"),
    option("--source", type=ANY_PATH, help="tracknet: the rosbag2 or video both run over"),
    option("--data", type=ANY_PATH,
           help="tracknet: truth CSV, for metric differences; yolo: the COCO data set both run over (JSON or folder)"),
    parameter_option("median_warmup"),
    parameter_option("heatmap_threshold"),
    prompt_options(),
    TASK,
    option("--out", "out_dir", type=FOLDER, default=Path("vision_factory_compare")),
    PROGRESS,
)  # fmt: skip
def compare(
    model_type: str,
    model: Path,
    model_b: Path | None,
    target_a: str,
    target_b: str,
    source: Path,
    data: Path | None,
    median_warmup: int,
    heatmap_threshold: float,
    out_dir: Path,
    **prompts: Any,
) -> None:
    """Run one source through two configurations and report how their results differ.

    Metric differences (with --data) get a verdict: below 0.001 excellent, below 0.01 good,
    a drop of 0.01 or more a warning naming the metric, a rise of as much "better". Output
    differences: visibility disagreements and ball position differences in pixels. Saved as
    OUT/compare_<source>_<A>_vs_<B>.json.

    \b
    Examples:
      vision-factory compare --model-type tracknet --model TrackNet.onnx --source rally_bag --data truth.csv
      vision-factory compare --model-type tracknet --model fp32.onnx --model-b fp16.onnx --b onnx:cpu --source rally.mp4
    """
    configurations = ((model, target_a), (model_b or model, target_b))
    options = {"source": source, "data": data, "median_warmup": median_warmup, "out_dir": out_dir}
    options["heatmap_threshold"] = heatmap_threshold
    options["progress"] = _progress_bars()
    from .tools.evaluation import family_evaluation

    prompts["prompt"] = task_prompt(prompts, prompts.get("prompt"))
    with _reported():  # the family's result kind compares it (tools/evaluation.py)
        options["prompts"] = _prompt_options(model_type, prompts)
        _show(family_evaluation(FAMILIES[model_type]).compare(model_type, configurations, options))


@click.command()
@options(
    model_type_option((*QUANTIZE_TYPES, *REFUSED_TYPES), "model family" + bool(REFUSED_TYPES) * (
                      f" ({', '.join(REFUSED_TYPES)}: refused, saying why and what to check instead)"), required=True),
    option("--model", type=MODEL, required=True, help="FP32 ONNX model"),
    option("--calibration", type=ANY_PATH,
           help="int8: a folder of images, a video or a rosbag2 (its image topic), run through the family's "
           "pre-processing"),
    out_option("the quantized model: NAME.onnx (ONNX Runtime), NAME.xml with NAME.bin (OpenVINO); NAME alone: "
               "--backend auto writes whichever it keeps", kind=FILE, dest="out"),
    tool_option("--backend", run_quantize, "backend", type=click.Choice(QUANTIZE_BACKENDS),
                help="auto: int8 for ONNX Runtime and for OpenVINO (where nncf is installed), timed in turn, the "
                "faster kept (OpenVINO only when 10% faster); fp16: onnx"),
    tool_option("--precision", run_quantize, "precision", type=click.Choice(PRECISIONS)),
    tool_option("--frames", run_quantize, "frames", type=int, help="calibration frames (the first N)"),
    tool_option("--method", run_quantize, "method", type=click.Choice(METHODS), help="onnx int8 calibration"),
    option("--float-tail/--no-float-tail", "keep_tail", default=True, show_default=True,
           help="keep the last conv on each path to the outputs, and what follows, in float"),
    option("--data", type=ANY_PATH,
           help="compare the result with the model on: a COCO data set (JSON or folder); tracknet: truth CSV; "
           "rtmpose, reid: images, a video or a rosbag2 (the --detector's people)"),
    option("--source", type=ANY_PATH, help="tracknet: the bag or video of the --data CSV"),
    option("--detector", "detector_model", type=FILE,
           help="rtmpose, reid: the YOLO model finding the people whose crops calibrate and compare"),
    option("--decoder", "decoder_path", type=FILE,
           help="sam: the prompt decoder of the --model encoder, kept as it is (the encoder alone is quantized; the "
           "masks of both encoders go through it)  [default: the one beside the encoder]"),
    prompt_options("--prompt", "--tokenizer", "--text-encoder", "--text-threshold",
                   prefix="open_vocab (calibration and the check, kept as they are): "),
    option("--imgsz", type=int, help="yolo models with dynamic input: the input size  [default: as the nodes]"),
    option("--input-size", help="fasterrcnn / rtmpose with dynamic input: WIDTHxHEIGHT"),
    option("--depth-kind", type=click.Choice(["metric", "relative"]),
           help="depth: metric or relative, for a model whose file does not say"),
    option("--speed-runs", type=click.IntRange(min=1), default=50, show_default=True, help="timed runs of each"),
    tool_option("--threads", run_quantize, "threads", type=click.IntRange(min=0),
                help="CPU threads when timing, 0 = default"),
    tool_option("--target-cpu", run_quantize, "target_cpu", type=click.Choice(TARGET_CPUS),
           help="int8: the CPU it runs on: vnni (AVX-512 VNNI, AVX-VNNI, AMX), avx2 (x86 without VNNI: 7-bit weights, "
           "which its int8 kernels do not saturate), auto = this CPU's kind, then 7-bit weights where that loses "
           "more than --max-loss"),
    option("--max-loss", type=click.FloatRange(min=0),
           help="with --data: the accuracy loss above which the command fails and renames the model "
           f"NAME.rejected.EXT  [default: {MAX_LOSS_DEFAULT}]"),
    option("--accept-loss", is_flag=True, help="keep the model under --out whatever accuracy it lost"),
    PROGRESS,
)  # fmt: skip
def quantize(imgsz: int | None, input_size: str | None, depth_kind: str | None, **given: Any) -> None:
    """An INT8 (or FP16) copy of a model, checked against it.

    INT8 is calibrated on the first --frames frames of --calibration, pre-processed as the
    node does (letterbox for YOLO, TrackNet windows with the background median). onnx:
    ONNX Runtime static QDQ, per-channel weights; openvino: NNCF post-training quantization,
    written as IR. The last conv on each path to the outputs and what follows (YOLO: the
    head's final convs, concat and decode; a transformer whose convs are its patch embedding:
    its last MatMul) stay in float, as does a mask's -inf. open_vocab is calibrated with the
    prompt its check uses (--prompt, else --data's category names). FP16 is for GPU targets. The model
    keeps its metadata and records its provenance (`inspect` shows it). INT8 is made for the
    CPU kind of --target-cpu (recorded too): ONNX Runtime's int8 kernels saturate on x86 CPUs
    without VNNI unless the weights take 7 bits. The models are timed against the source on
    the same inputs in turn (--backend auto: for both backends, the faster kept), and with
    --data compared as `compare` does: a model that loses more than --max-loss is replaced by
    the next choice (auto: 7-bit weights, the other backend); when none holds, the command
    fails (exit 1) naming the options that would help and leaves the least lossy as
    NAME.rejected.EXT, unless --accept-loss.

    \b
    Examples:
      vision-factory quantize --model-type yolo --model yolov8n.onnx --calibration frames/ \\
          --out yolov8n_int8.onnx --data coco_val/
      vision-factory quantize --model-type yolo --model yolov8n.onnx --calibration street.mp4 \\
          --backend openvino --out yolov8n_int8.xml
      vision-factory quantize --model-type tracknet --model tracknet.onnx --calibration rally_bag \\
          --out tracknet_int8.onnx --data truth.csv --source rally.mp4
      vision-factory quantize --model-type sam --model sam/vision_encoder.onnx --calibration frames/ \\
          --out vision_encoder_int8.onnx --data coco_seg/
      vision-factory quantize --model-type open_vocab --model gdino/model.onnx --calibration frames/ \\
          --out gdino_int8.onnx --data coco_val/
    """
    from .tools.quantize import AccuracyLost

    options = {"--imgsz": imgsz, "--input-size": input_size, "--depth-kind": depth_kind}
    with _reported():
        options |= _prompt_options(given["model_type"], given)  # --decoder, --prompt, --tokenizer ...
        try:
            report = run_quantize(
                **given, options=options, log=lambda text: _echo(text, err=True), progress=_progress_bars()
            )
        except AccuracyLost as lost:
            _show(lost.report)
            raise
        _show(report)


COMMANDS = (
    bench,
    evaluate_command,
    compare,
    quantize,
)
