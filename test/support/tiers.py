"""Test tiers, decided from what a test reaches rather than marked by hand.

A test is ``dds`` when its code, its fixtures or the helpers they call (followed through test/ and vision_factory/
functions, transitively) reach something that starts a ROS 2 context, and ``subprocess`` when they reach something
that starts a process; ``slow`` when pure but listed in SLOW; else ``unit``. The rule reads code, so it is checked
at run time: every ``unit`` test runs under ``guard`` (conftest), which makes starting a ROS context, a process or
a network connection fail the test. ``python -m pytest -m unit`` is the tier to run on every commit.
"""

from __future__ import annotations

import inspect
import os
import socket
import sys
import types
from pathlib import Path

TEST_DIR = Path(__file__).resolve().parent.parent
PACKAGE_DIR = TEST_DIR.parent / "vision_factory"

# Modules whose use means the tier: a name bound to one of them (or to a member of one) in reached code.
DDS_MODULES = ("launch", "launch_ros", "launch_testing")
DDS_STARTERS = {"init", "create_node", "Node", "LifecycleNode", "Context"}  # of rclpy (a module or its member)
PROCESS_MODULES = ("subprocess", "multiprocessing", "concurrent.futures.process", "pty")
# Helpers (by their module-level name in test/ or vision_factory/) that start DDS or a process.
DDS_NAMES = {"NodeProcess", "Probe", "Lifecycle"}
PROCESS_NAMES = {"NodeProcess", "run_cli", "generate_and_install", "install_like_colcon", "pypi_model"}
PROCESS_ATTRIBUTES = {"system", "popen", "fork", "posix_spawn", "posix_spawnp", "execv", "execvp"}  # of os

# Tests that start a process through code the rule cannot follow (a click command run by name: `bench` measures
# each target in a child process), found by running the unit tier under ``guard``. Keys: "module.py::test name".
STARTS_A_PROCESS = {
    "test_bench.py::test_bench_every_field_and_unavailable_backends_with_reasons",
    "test_bench.py::test_bench_through_the_nodes",
    "test_fasterrcnn.py::test_bench_times_the_fasterrcnn_pipeline",
    "test_florence2_tools.py::test_bench_times_the_encoding_the_first_token_and_each_token_after_on_each_backend",
    "test_new_user.py::test_bench_advice_for_an_absent_provider_names_a_bench_option",
    "test_new_user.py::test_bench_node_runs_a_detector_node_on_each_target",
    "test_safe_writes.py::test_bench_never_writes_through_a_link",
    "test_tracknet_stride.py::test_bench_with_stride_runs_the_model_once_every_stride_frames",
    "test_yolo.py::test_bench_times_the_yolo_pipeline",
}

# Pure tests of which a case took 0.6 s or more (setup included) in a run of the unit tier on 2 busy cores: they
# run with the other tiers, not on every commit. Keys: "module.py::test name" (all its parameters).
SLOW = {
    # added 2026-11-29 (a quiet run of the unit tier: 1519 tests in 90 s, over its minute):
    "test_cameras.py::test_a_runner_of_concurrent_runs_gives_each_thread_its_own_answer",
    "test_depth.py::test_the_fast_resize_filter_stays_near_transformers_maps",
    "test_detr_heads.py::test_eval_scores_the_detr_model_as_pycocotools_does_on_the_adapters_detections",
    "test_drawing.py::test_a_depth_map_has_a_colour_bar_with_its_range_and_relative_depth_says_near_and_far",
    "test_florence2.py::test_openvino_runs_the_pair_where_it_cannot_compile_the_merged_decoder",
    "test_florence2.py::test_predict_writes_transformers_answers",
    "test_florence2.py::test_the_pair_layout_gives_the_merged_decoders_tokens",
    "test_florence2.py::test_beam_search_is_not_greedy_and_the_pair_layout_searches_as_the_merged_decoder",
    "test_florence2.py::test_num_beams_is_the_exports_unless_given_and_bad_settings_are_refused",
    "test_generator.py::test_a_package_without_a_model_runs_any_model_and_states_the_backends_defaults",
    "test_generator.py::test_copied_modules_are_this_packages_own_bytes",
    "test_generator.py::test_existing_target_needs_force_and_out_must_be_writable",
    "test_generator.py::test_runners_generated_for_two_models_differ_in_their_constants_alone",
    "test_generator_writes.py::test_an_existing_zip_needs_force_and_a_folder_there_is_refused",
    "test_hosts_launch.py::test_a_hosts_file_nested_too_deep_is_refused_by_name",
    "test_layout.py::test_a_generated_package_carries_only_its_own_familys_code",
    "test_layout.py::test_an_adapter_is_put_on_a_runner_one_way",
    "test_layout.py::test_no_import_cycles",
    "test_masks.py::test_eval_scores_masks_as_ultralytics_measured",
    "test_open_vocab_node.py::test_predict_gives_transformers_detections",
    "test_progress.py::test_eval_counts_the_images_of_the_data_set",
    "test_progress.py::test_quantize_counts_the_comparisons_images_too",
    "test_prompted_tools.py::test_compare_runs_a_prompted_family_on_onnx_runtime_and_openvino",
    "test_prompted_tools.py::test_eval_of_sam_prompts_it_with_each_images_truth_boxes",
    "test_prompted_tools.py::test_quantize_of_sam_makes_the_encoder_int8_and_scores_its_masks_through_the_same_decoder",
    "test_prompted_tools.py::test_quantize_calibrates_an_open_vocab_models_text_inputs_with_the_prompt_its_check_uses",
    "test_prompted_tools.py::test_quantize_of_open_vocab_checks_the_ap_lost_as_eval_prompts_it",
    "test_quantize.py::test_a_segmentation_model_keeps_its_prototype_branch_in_float_and_its_mask_ap",
    "test_cross_camera.py::test_no_global_id_is_ever_on_two_people_at_once",
    "test_depth.py::test_quantize_calibrates_on_the_depth_processors_input_and_reports_the_relative_difference",
    "test_depth.py::test_quantize_is_told_a_files_depth_kind_and_refuses_without",
    "test_ball_eval.py::test_compare_onnx_runtime_and_openvino",
    "test_ball_eval.py::test_eval_reads_a_video",
    "test_ball_eval.py::test_eval_runs_the_tracker_over_a_bag",
    "test_ball_stream.py::test_failed_frames_leave_nothing_behind",
    "test_detr_heads.py::test_compare_onnx_runtime_and_openvino_on_a_d_fine_export",
    "test_detr_heads.py::test_quantize_reports_the_int8_detr_models_loss_as_pycocotools_measures_it",
    "test_fasterrcnn.py::test_compare_a_fasterrcnn_model_with_itself_on_two_backends",
    "test_fasterrcnn.py::test_predict_and_eval_run_a_fasterrcnn_model",
    "test_fasterrcnn.py::test_wrapped_yolo_detects_what_yolo_detects",
    "test_frame_pipeline.py::test_eval_runs_the_node_pipeline_through_a_frame_size_change",
    "test_frame_pipeline.py::test_eval_with_inpaintnet_is_the_node_pipeline_with_it",
    "test_generator.py::test_hostile_values_are_escaped_in_every_generated_file",
    "test_quantize.py::test_a_full_range_int8_model_says_once_that_a_cpu_without_vnni_loses_accuracy",
    "test_quantize.py::test_an_accuracy_loss_over_max_loss_fails_the_command_unless_accepted",
    "test_quantize.py::test_fasterrcnn_openvino_int8_detects_as_fp32_does_and_differs_as_compare_says",
    "test_quantize.py::test_fp16_keeps_the_float_tail_in_float32_so_a_heatmap_peak_stays_where_fp32_puts_it",
    "test_quantize.py::test_fp16_models_load_and_stay_close",
    "test_quantize.py::test_int8_keeps_the_metadata_and_records_its_provenance",
    "test_quantize.py::test_target_cpu_avx2_quantizes_to_7_bit_weights_and_records_the_choice",
    "test_quantize.py::test_the_default_kind_is_this_cpus",
    "test_quantize.py::test_yolo_pose_openvino_int8_loads_in_the_openvino_runner_with_its_provenance",
    "test_quantize_choice.py::test_auto_keeps_openvino_where_onnx_runtime_cannot_hold_the_accuracy",
    "test_quantize_choice.py::test_auto_tries_every_choice_before_it_gives_up_and_the_limit_it_names_keeps_a_model",
    "test_reid.py::test_fixed_batch_and_dynamic_batch_models_give_the_same_embeddings",
    "test_safe_writes.py::test_reid_tune_out_hard_linked_to_the_model_is_a_clear_refusal",
    "test_sam.py::test_a_box_with_points_goes_through_meta_and_sam2",
    "test_sam.py::test_a_prompt_the_decoder_cannot_take_is_dropped_with_the_reason",
    "test_sam.py::test_a_prompts_mask_does_not_depend_on_the_others_of_its_frame",
    "test_sam.py::test_masks_equal_transformers",
    "test_sam.py::test_prompts_past_the_cap_are_dropped_counted_and_said_once",
    "test_sam.py::test_the_encoder_runs_once_a_frame_and_the_decoder_once_per_batch",
    "test_sam.py::test_the_last_frames_of_several_cameras_stay_encoded",
    "test_sam.py::test_the_recorded_masks_depend_on_the_prompt",
    "test_sam_family.py::test_eval_gives_the_mean_iou_of_each_truth_mask_with_the_mask_its_box_prompted",
    "test_sam_family.py::test_predict_gives_transformers_masks_as_coco_rle",
    "test_tracking_reid.py::test_reid_tune_measures_the_embedder_and_writes_its_thresholds_into_a_copy",
    "test_tracking_reid.py::test_the_truth_is_the_pasted_crop_and_someone_hides_for_over_a_second",
    "test_tracknet.py::test_module_matches_reference_exactly",
    "test_tracknet.py::test_prepare_ahead_gives_the_same_outputs",
    "test_tracknet_streams.py::test_a_pause_answers_the_pending_frames_and_changes_no_later_answer",
    "test_tracknet_streams.py::test_a_pause_with_inpaintnet_changes_no_later_answer",
    "test_tracknet_streams.py::test_a_sender_that_waits_for_each_answer_is_answered_frame_by_frame",
    "test_tracknet_streams.py::test_a_stream_cut_inside_its_warm_up_leaves_nothing_to_the_next",
    "test_tracknet_streams.py::test_bad_frames_between_streams_leave_nothing_behind",
    "test_tracknet_streams.py::test_streams_of_different_sizes_each_start_fresh",
    "test_tracknet_streams.py::test_the_same_clip_twice_is_answered_as_by_a_fresh_stream",
    "test_tracknet_stride.py::test_stride_equals_the_windowed_evaluation",
    "test_yolo.py::test_compare_onnx_runtime_and_openvino_on_a_real_detector",
    "test_yolo.py::test_eval_runs_the_model_over_a_coco_folder",
    "test_yolo.py::test_nms_limit_is_the_first_picks_of_the_full_run",
    "test_yolo.py::test_shapes_model_reaches_its_validation_ap",
    "test_yolo_heads.py::test_eval_of_the_end_to_end_yolo26n_reaches_ultralytics_figures",
    "test_yolo_heads.py::test_eval_scores_the_end_to_end_segmentation_masks_as_pycocotools_does",
    "test_yolo_heads.py::test_openvino_runs_the_end_to_end_detector_as_onnx_runtime_does",
    "test_yolo_heads.py::test_quantize_keeps_the_end_to_end_head_in_float_and_the_int8_model_is_still_end_to_end",
}


def _code_objects(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _ours(obj) -> bool:
    """Defined in test/ or vision_factory/ (followed), not in a library."""
    try:
        path = Path(inspect.getfile(obj)).resolve()
    except (TypeError, OSError):
        return False
    return path.is_relative_to(TEST_DIR) or path.is_relative_to(PACKAGE_DIR)


def _module_kind(module: types.ModuleType) -> set[str]:
    name = module.__name__
    kinds = set()
    if any(name == m or name.startswith(m + ".") for m in DDS_MODULES):
        kinds.add("dds")
    if any(name == m or name.startswith(m + ".") for m in PROCESS_MODULES):
        kinds.add("subprocess")
    return kinds


def _is_node(cls: type) -> bool:
    return any(base.__module__.startswith("rclpy.") and base.__name__ in DDS_STARTERS for base in cls.__mro__)


class Reach:
    """What a set of functions reaches, memoised across tests."""

    def __init__(self):
        self._seen: dict[int, set[str]] = {}

    def of(self, func) -> set[str]:
        func = inspect.unwrap(func)
        if isinstance(func, (staticmethod, classmethod)):
            func = func.__func__
        key = id(func)
        if key in self._seen:
            return self._seen[key]
        self._seen[key] = kinds = set()  # a cycle reaches nothing more
        code = getattr(func, "__code__", None)
        if code is None:
            if inspect.isclass(func):
                for member in vars(func).values():
                    if inspect.isfunction(member) or isinstance(member, (staticmethod, classmethod, property)):
                        kinds |= self.of(member.fget if isinstance(member, property) else member)
            return kinds
        names = {name for c in _code_objects(code) for name in c.co_names}
        scope = dict(vars(sys.modules["builtins"]))
        scope.update(getattr(func, "__globals__", {}))
        if func.__closure__:
            for name, cell in zip(code.co_freevars, func.__closure__):
                try:
                    scope[name] = cell.cell_contents
                except ValueError:
                    pass
            names |= set(code.co_freevars)
        for name in names:
            value = scope.get(name)
            if value is None:
                continue
            value = inspect.unwrap(value) if callable(value) and hasattr(value, "__wrapped__") else value
            if name in DDS_NAMES and _ours(value):
                kinds.add("dds")
            if name in PROCESS_NAMES and _ours(value):
                kinds.add("subprocess")
            if isinstance(value, types.ModuleType):
                kinds |= _module_kind(value)
                if value.__name__.split(".")[0] == "rclpy" and names & DDS_STARTERS:
                    kinds.add("dds")
                if value is os and names & PROCESS_ATTRIBUTES:
                    kinds.add("subprocess")
                if value is socket and names & {"create_connection", "connect", "connect_ex"}:
                    kinds.add("network")
                if _ours(value):  # module.function: follow the functions named in this code
                    for attribute in names:
                        member = getattr(value, attribute, None)
                        if (inspect.isfunction(member) or inspect.isclass(member)) and _ours(member):
                            kinds |= self.of(member)
                continue
            if isinstance(value, type) and _is_node(value):
                kinds.add("dds")
            module = getattr(value, "__module__", None)
            if isinstance(module, str) and module in sys.modules:
                kinds |= _module_kind(sys.modules[module])
                if module.split(".")[0] == "rclpy" and getattr(value, "__name__", "") in DDS_STARTERS:
                    kinds.add("dds")
            if (inspect.isfunction(value) or inspect.isclass(value)) and _ours(value):
                kinds |= self.of(value)
        return kinds


def tier(item, reach: Reach) -> set[str]:
    """The markers of a collected test: some of dds, subprocess, network, slow; or unit."""
    kinds = set(reach.of(item.function))
    info = getattr(item, "_fixtureinfo", None)
    for name in getattr(item, "fixturenames", ()):
        for definition in info.name2fixturedefs.get(name, ()) if info else ():
            if _ours(definition.func) and definition.func is not guard and name != "_unit_guard":
                kinds |= reach.of(definition.func)
    key = f"{Path(item.path).name}::{item.originalname}"
    if key in STARTS_A_PROCESS:
        kinds.add("subprocess")
    if not kinds and key in SLOW:
        kinds.add("slow")
    return kinds or {"unit"}


def guard(monkeypatch) -> None:
    """Make starting a ROS 2 context, a process or an internet connection fail the test."""

    def refused(what):
        def refuse(*args, **kwargs):
            raise AssertionError(f"a unit test must not start {what} (tiers in test/support/tiers.py)")

        return refuse

    import _posixsubprocess
    import subprocess

    monkeypatch.setattr(subprocess.Popen, "__init__", refused("a process (subprocess.Popen)"))
    monkeypatch.setattr(_posixsubprocess, "fork_exec", refused("a process (fork_exec)"))
    for name in ("fork", "system", "posix_spawn", "posix_spawnp", "popen"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, refused(f"a process (os.{name})"))
    original_connect = socket.socket.connect

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise AssertionError("a unit test must not open a network connection (tiers in test/support/tiers.py)")
        return original_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    try:
        import rclpy
        import rclpy.context
    except ImportError:  # without ROS nothing can start DDS
        return
    monkeypatch.setattr(rclpy, "init", refused("a ROS 2 context (rclpy.init)"))
    monkeypatch.setattr(rclpy.context.Context, "init", refused("a ROS 2 context (Context.init)"))
