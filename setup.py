from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "vision_factory"
ROOT = Path(__file__).parent


def share_files(folder: str) -> list[tuple[str, list[str]]]:
    """Every file under ``folder``, installed to share/vision_factory/<same relative path>."""
    groups: dict[str, list[str]] = {}
    for path in sorted((ROOT / folder).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            relative = path.relative_to(ROOT)
            groups.setdefault(f"share/{PACKAGE}/{relative.parent}", []).append(str(relative))
    return list(groups.items())


def node_entry_points() -> list[str]:
    """<family>_node for each rendered node entry point, vision_factory/<family>_onnx_node.py."""
    nodes = sorted((ROOT / PACKAGE).glob("*_onnx_node.py"))
    return [f"{path.stem.removesuffix('_onnx_node')}_node = {PACKAGE}.{path.stem}:main" for path in nodes]


ROS_WHEELS = [
    "ros-rclpy>=9,<10",  # Kilted: the release tested here, and the one install-vision-msgs has toolchain pins for
    "ros-lifecycle-msgs",  # the lifecycle services of every node (rclpy.lifecycle)
    "ros-std-msgs",
    "ros-sensor-msgs",
    "ros-geometry-msgs",
    "ros-visualization-msgs",
    "ros-diagnostic-msgs",
    "ros-rmw-fastrtps-cpp",
]

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        *share_files("launch"),
        *share_files("config"),
        *share_files("templates"),
        # vision_msgs sources for `vision-factory install-vision-msgs` (pip-only machines; a distro uses rosdep).
        *share_files("interfaces"),
        *share_files("rosdep"),
    ],
    python_requires=">=3.10",
    install_requires=[
        "numpy",
        "opencv-python-headless",
        "onnx",
        "click",
        "jinja2",
        "matplotlib",
        "pillow",  # images resized by PIL as the exporters resize them: DETR (models/detr.py), depth (models/depth.py)
        # Text prompts tokenized by the export's own tokenizer.json / vocab.txt: Grounding DINO and OWL
        # (models/tokenizer_file.py), never downloaded.
        "tokenizers",
        "pycocotools",
        # eval --model-type track: CLEAR MOT and IDF1 (1.4 works with numpy 2 / pandas 2+ as tools/mot.py calls it),
        # and scipy's assignment solver for HOTA and the tracker (linear_sum_assignment).
        "motmetrics>=1.4",
        "scipy",
        "pyyaml",
        "rosbags",
        "tqdm",  # progress bars of the long commands on a terminal (vision_factory/progress.py)
    ],
    extras_require={
        # ROS 2 from PyPI wheels, for machines without a ROS distribution. vision_msgs has no wheel: after this,
        # `vision-factory install-vision-msgs` builds it, installing the rosidl toolchain wheels it needs with pins
        # matching the ros-rclpy release pip chose here (an extra could not follow it), see tools/interfaces.py.
        "ros": ROS_WHEELS,
        # Exactly one ONNX Runtime: both install the same 'onnxruntime' module.
        "cpu": ["onnxruntime"],
        "gpu": ["onnxruntime-gpu"],
        # Other backends, for `vision-factory backends` and tools; generated packages declare their own.
        "openvino": ["openvino", "nncf"],  # nncf: `vision-factory quantize --backend openvino`
        "tensorrt": ["tensorrt", "cuda-python"],
        # scikit-image: its sample photos (people, faces) for the real-model tests.
        "test": ["pytest", "pytest-timeout", "pytest-xdist", "openvino", "nncf", "ruff", "scikit-image"],
        # The manual's site (docs/, mkdocs.yml): `mkdocs build --strict` in .ci/run; pymdown-extensions: its snippets.
        "docs": ["mkdocs>=1.6,<2", "mkdocs-material>=9.5,<10", "pymdown-extensions>=10.2,<14"],
    },
    zip_safe=False,
    maintainer="vision_factory maintainers",
    maintainer_email="maintainers@vision-factory.dev",
    description="ONNX models as production ROS 2 perception nodes",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "vision-factory = vision_factory.cli:main",
            *node_entry_points(),
            "detect_3d_node = vision_factory.detect_3d_node:main",  # no model: not rendered per backend
        ],
    },
)
