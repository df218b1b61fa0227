"""A seeded campaign of bad, lying and unusual image messages, mixed with valid frames, played into a
real node over DDS: what the fuzz tests and ``benchmarks/soak.py`` run.

Every message carries a stamp of its own, so each answer is traced back to what was sent. Each one is
marked with what a node must do with it: ``must_answer`` (a valid frame, usual or not), ``must_refuse``
(it cannot be read, or it is too large) or neither (a node may decode it or refuse it: corrupted
compressed data that a decoder may still read, a frame of another size than a tracker's stream).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import cv2
import numpy as np

from ..files import open_new
from ..images import SUPPORTED_ENCODINGS

ANSWER, REFUSE, EITHER = "answer", "refuse", "either"
POOL_SIZE = 64  # distinct messages of each class in a campaign; longer campaigns send them again

# Text an attacker controls: forged log lines, terminal escapes, very long and non-ASCII text.
HOSTILE_TEXT = (
    "32FC1",
    "",
    "jpeg",
    "bgr8\n[FATAL] [1700000000.000000000] [tracknet]: forged line",
    "\x1b[2J\x1b[31mred\x1b[0m",
    "bgr8\r\x00\x07",
    "mono8\u2028next",
    "x" * 5000,
    "rgb8 ",
    "BGR8",
)


@dataclass
class Shot:
    """One message of a campaign and what the node must do with it."""

    message: object  # sensor_msgs Image or CompressedImage
    kind: str  # the campaign class it belongs to (a fixed name)
    expect: str  # ANSWER, REFUSE or EITHER
    frame: int = -1  # index of the valid frame it carries (usual valid frames only), else -1


def _header(frame_id: str = "camera"):
    from std_msgs.msg import Header

    return Header(frame_id=frame_id)


def _raw(width: int, height: int, encoding: str, step: int, data: bytes, bigendian: bool = False, frame_id="camera"):
    from sensor_msgs.msg import Image

    return Image(
        header=_header(frame_id),
        width=width,
        height=height,
        encoding=encoding,
        is_bigendian=int(bigendian),
        step=step,
        data=data,
    )


def _compressed(data: bytes, format: str = "jpeg", frame_id: str = "camera"):
    from sensor_msgs.msg import CompressedImage

    return CompressedImage(header=_header(frame_id), format=format, data=data)


def _bgr8(frame: np.ndarray, frame_id: str = "camera"):
    height, width = frame.shape[:2]
    return _raw(width, height, "bgr8", width * 3, np.ascontiguousarray(frame).tobytes(), frame_id=frame_id)


_CHANNELS = {"mono8": 1, "8UC1": 1, "mono16": 1, "16UC1": 1, "bgr16": 3, "rgb16": 3, "bgra8": 4, "rgba8": 4}


def _pixels_of(encoding: str, width: int, height: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Random pixel data laid out as ``encoding`` wants it, and its bytes per pixel."""
    if encoding.startswith("bayer_") or encoding in ("mono8", "8UC1"):
        return rng.integers(0, 256, (height, width), np.uint8), 1
    if encoding in ("uyvy", "yuv422", "yuyv", "yuv422_yuy2"):
        return rng.integers(0, 256, (height, width, 2), np.uint8), 2
    channels = _CHANNELS.get(encoding, 3)
    if encoding.endswith("16") or encoding == "16UC1":
        return rng.integers(0, 65536, (height, width, channels), np.uint16), 2 * channels
    return rng.integers(0, 256, (height, width, channels), np.uint8), channels


def unusual_frame(rng: np.random.Generator, size: tuple[int, int] | None = None, encoding: str | None = None):
    """A valid raw frame of an unusual size, encoding or row padding (width, height as ``size``)."""
    sizes = ((1, 20000), (20000, 1), (1600, 3), (3, 1600), (1, 600), (600, 1), (1, 1), (2, 2), (3, 5), (641, 479))
    width, height = size or sizes[rng.integers(len(sizes))]
    encoding = encoding or SUPPORTED_ENCODINGS[rng.integers(len(SUPPORTED_ENCODINGS))]
    if encoding in ("uyvy", "yuv422", "yuyv", "yuv422_yuy2") or encoding.startswith("bayer_"):
        width, height = max(2, width + width % 2), max(2, height + height % 2)  # whole 2x2 / 2x1 blocks
    pixels, pixel_bytes = _pixels_of(encoding, width, height, rng)
    padding = int(rng.integers(0, 9))
    bigendian = pixels.dtype == np.uint16 and bool(rng.integers(2))
    if bigendian:
        pixels = pixels.astype(">u2")
    rows = pixels.reshape(height, width * pixel_bytes // pixels.itemsize).view(np.uint8).reshape(height, -1)
    padded = np.zeros((height, width * pixel_bytes + padding), np.uint8)
    padded[:, : width * pixel_bytes] = rows
    return _raw(width, height, encoding, width * pixel_bytes + padding, padded.tobytes(), bigendian)


def _bad_raw(rng: np.random.Generator, size: tuple[int, int]) -> Shot:
    width, height = size
    choice = int(rng.integers(5))
    if choice == 0:
        encoding = HOSTILE_TEXT[rng.integers(len(HOSTILE_TEXT))] + str(rng.integers(1000)) * int(rng.integers(2))
        return Shot(_raw(width, height, encoding, width * 3, bytes(width * height * 3)), "unsupported encoding", REFUSE)
    if choice == 1:
        zero_width = bool(rng.integers(2))
        return Shot(_raw(0 if zero_width else width, height if zero_width else 0, "bgr8", 0, b""), "no pixels", REFUSE)
    if choice == 2:
        return Shot(
            _raw(width, height, "bgr8", int(rng.integers(0, width * 3)), bytes(width * 3 * height)),
            "step too small",
            REFUSE,
        )
    if choice == 3:  # declares far more than it carries, up to 65535 x 65535
        huge = (int(rng.integers(1, 65536)), int(rng.integers(1, 65536)))
        w, h = huge if rng.integers(2) else (width, height)
        return Shot(_raw(w, h, "bgr8", w * 3, bytes(int(rng.integers(0, 4096)))), "data too short", REFUSE)
    # An odd step that does not match the data it has.
    step = width * 3 + int(rng.integers(1, 64))
    return Shot(
        _raw(width, height, "bgr8", step, bytes(step * height - int(rng.integers(1, step)))), "data too short", REFUSE
    )


@lru_cache(maxsize=4)
def _png_declaring(width: int, height: int) -> bytes:
    """A real, valid, tiny PNG of ``width`` x ``height`` black grey pixels (a decompression bomb)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return len(body).to_bytes(4, "big") + kind + body + zlib.crc32(kind + body).to_bytes(4, "big")

    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 0, 0, 0, 0])
    compressor = zlib.compressobj(9)
    row = bytes(width + 1)  # filter byte 0 and black pixels
    body = b"".join(compressor.compress(row) for _ in range(height)) + compressor.flush()
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", body) + chunk(b"IEND", b"")


def _jpeg_declaring(jpeg: bytes, width: int, height: int) -> bytes:
    """``jpeg`` with the size in its start-of-frame header replaced (its data no longer matches)."""
    data = bytearray(jpeg)
    index = 2
    while index + 9 < len(data):
        marker, length = data[index + 1], int.from_bytes(data[index + 2 : index + 4], "big")
        if marker in (0xC0, 0xC1, 0xC2):
            data[index + 5 : index + 9] = height.to_bytes(2, "big") + width.to_bytes(2, "big")
            break
        index += 2 + length
    return bytes(data)


class _Encoded:
    """JPEG and PNG encodings of the valid frames, and the bombs, computed once per campaign."""

    def __init__(self, frames: Sequence[np.ndarray]):
        self.jpeg = [cv2.imencode(".jpg", frame)[1].tobytes() for frame in frames]
        self.png = [cv2.imencode(".png", frame, [cv2.IMWRITE_PNG_COMPRESSION, 1])[1].tobytes() for frame in frames]
        self.png_bomb = _png_declaring(30000, 30000)  # 900 Mpixels in about 1 MB
        self.jpeg_bomb = _jpeg_declaring(self.jpeg[0], 65000, 65000)


def _bad_compressed(rng: np.random.Generator, encoded: _Encoded) -> Shot:
    format = HOSTILE_TEXT[rng.integers(len(HOSTILE_TEXT))] if rng.integers(4) == 0 else "jpeg"
    which = int(rng.integers(len(encoded.jpeg)))
    choice = int(rng.integers(7))
    if choice == 0:
        return Shot(_compressed(rng.bytes(int(rng.integers(0, 5000))), format), "garbage", REFUSE)
    if choice == 1:
        return Shot(_compressed(b"", format), "empty", REFUSE)
    if choice == 2:  # cut inside the entropy-coded data or the image data
        source = encoded.jpeg[which] if rng.integers(2) else encoded.png[which]
        cut = int(rng.integers(len(source) // 4, len(source) - 2))
        return Shot(_compressed(source[:cut], format), "truncated", EITHER)
    if choice == 3:  # a few bytes of the data flipped: decoders may or may not read it
        data = bytearray(encoded.jpeg[which])
        for position in rng.integers(len(data) // 4, len(data), 8):
            data[position] ^= 0xFF
        return Shot(_compressed(bytes(data), format), "corrupted", EITHER)
    if choice == 4:  # a valid PNG that says it is a JPEG: decodable, it must be answered
        return Shot(_compressed(encoded.png[which], "jpeg"), "lying format", ANSWER)
    if choice == 5:
        return Shot(_compressed(encoded.png_bomb, "png"), "png bomb", REFUSE)
    return Shot(_compressed(encoded.jpeg_bomb, format), "jpeg bomb", REFUSE)


def campaign(
    frames: Sequence[np.ndarray],
    count: int,
    transport: str = "raw",
    seed: int = 0,
    valid_every: int = 4,
    unusual: str = ANSWER,
) -> list[Shot]:
    """``count`` messages: one valid frame (cycling through ``frames``) every ``valid_every``, the rest
    bad, lying or unusual messages of every class, drawn with ``seed``.

    ``unusual``: what a node must do with valid raw frames of unusual sizes and encodings (ANSWER for
    a detector; EITHER for a tracker, which skips frames of another size than its stream's).
    """
    rng = np.random.default_rng(seed)
    size = (frames[0].shape[1], frames[0].shape[0])
    encoded = _Encoded(frames) if transport == "compressed" else None
    valid_messages = [_compressed(jpeg) for jpeg in encoded.jpeg] if encoded else [_bgr8(frame) for frame in frames]
    pools: dict[str, list[Shot]] = {}

    def drawn(pool_name: str, make) -> Shot:
        """A new shot of ``make`` until its pool holds POOL_SIZE, then one drawn from the pool: messages
        are stamped as they are sent, so one object serves many times and memory stays bounded."""
        pool = pools.setdefault(pool_name, [])
        if len(pool) < POOL_SIZE:
            pool.append(make())
            return pool[-1]
        return pool[rng.integers(POOL_SIZE)]

    def hostile_frame_id() -> Shot:
        frame = frames[rng.integers(len(frames))]
        return Shot(_bgr8(frame, HOSTILE_TEXT[rng.integers(len(HOSTILE_TEXT))]), "hostile frame_id", ANSWER)

    shots: list[Shot] = []
    for index in range(count):
        if index % valid_every == 0:
            which = (index // valid_every) % len(frames)
            shots.append(Shot(valid_messages[which], "valid", ANSWER, which))
        elif encoded is not None:
            shots.append(drawn("compressed", lambda: _bad_compressed(rng, encoded)))
        elif rng.integers(3) == 0:
            shots.append(drawn("unusual", lambda: Shot(unusual_frame(rng), "unusual", unusual)))
        elif rng.integers(6) == 0:
            shots.append(drawn("hostile", hostile_frame_id))
        else:
            shots.append(drawn("bad", lambda: _bad_raw(rng, size)))
    return shots


def stream(frames: Sequence[np.ndarray], transport: str = "raw") -> list[Shot]:
    """``frames`` as valid messages, in order (a clean stream before or after a campaign)."""
    return [
        Shot(
            _compressed(cv2.imencode(".jpg", frame)[1].tobytes()) if transport == "compressed" else _bgr8(frame),
            "valid",
            ANSWER,
            index,
        )
        for index, frame in enumerate(frames)
    ]


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS (now) and VmHWM (peak) of a process, in KiB (Linux)."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0])
    return values


@dataclass
class Played:
    """What a node answered to a list of shots."""

    answers: dict[int, object] = field(default_factory=dict)  # shot index -> the answer message
    duplicates: int = 0  # answers to a shot already answered
    strangers: int = 0  # answers whose stamp matches no shot


ANSWERS_KEPT = 1000  # answers the node keeps for the player's reader, and the reader's own queue


class NodeUnderTest:
    """A node in its own process, fed shots over DDS by a test-side rclpy node; its answers by stamp.

    ``module``: run as ``python -m module``; ``output``: (topic, message class) answering each frame.
    """

    def __init__(
        self,
        module: str,
        params: dict[str, str],
        output: tuple[str, type],
        transport: str,
        log_path: Path,
        reliable: bool = True,
        depth: int = 100,
    ):
        import rclpy
        from rclpy.node import Node
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import CompressedImage, Image

        from ..parameters import kept_for_late_readers

        self.namespace = f"/vf_fuzz_{os.getpid()}_{int(time.monotonic_ns() % 1_000_000)}"
        answers = f"{self.namespace}/{output[0]}"
        overrides = {
            "input_transport": transport,
            "qos_reliability": "reliable" if reliable else "best_effort",
            # every answer reaches the player, also one sent before the node's writer learnt of its reader
            **kept_for_late_readers([answers], ANSWERS_KEPT),
        }
        command = [sys.executable, "-m", module, "--ros-args", "-r", f"__ns:={self.namespace}"]
        for key, value in {**overrides, **params}.items():
            command += ["-p", f"{key}:={value}"]
        self.log_path = log_path
        self._log = open_new(log_path)
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = Node("vf_fuzz_player", context=self.context)
        qos = QoSProfile(
            depth=depth, reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT
        )
        image_type, topic = (Image, "image") if transport == "raw" else (CompressedImage, "image/compressed")
        self.publisher = self.node.create_publisher(image_type, f"{self.namespace}/{topic}", qos)
        self._lock = threading.Condition()
        self._stamps: dict[tuple[int, int], int] = {}
        self._played: Played | None = None
        topic, message_type = output
        self.reader = self.node.create_subscription(
            message_type,
            answers,
            self._on_answer,
            QoSProfile(
                depth=ANSWERS_KEPT,
                reliability=ReliabilityPolicy.RELIABLE,
                durability=DurabilityPolicy.TRANSIENT_LOCAL,
            ),
        )
        self.executor = rclpy.executors.SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._spinner = threading.Thread(target=self.executor.spin, daemon=True)
        self._spinner.start()
        self._next_stamp = 1

    def _on_answer(self, message) -> None:
        stamp = (message.header.stamp.sec, message.header.stamp.nanosec)
        with self._lock:
            played = self._played
            if played is None:
                return
            index = self._stamps.get(stamp)
            if index is None:
                played.strangers += 1
            elif index in played.answers:
                played.duplicates += 1
            else:
                played.answers[index] = message
            self._lock.notify_all()

    def wait_ready(self, timeout: float = 300) -> None:
        """Until the node reads the frames and its answers reach this player (an answer sent before the player's
        reader matched is lost: on a loaded machine a stream's first answers were)."""
        deadline = time.monotonic() + timeout
        while self.publisher.get_subscription_count() == 0 or self.reader.get_publisher_count() == 0:
            if self.process.poll() is not None:
                raise RuntimeError(f"the node exited ({self.process.returncode}):\n{self.log()[-3000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the node never subscribed:\n{self.log()[-3000:]}")
            time.sleep(0.05)

    def play(
        self,
        shots: Sequence[Shot],
        rate: float | None = None,
        gap: float = 0.01,
        settle: float = 2.0,
        until: Collection[int] = (),
        timeout: float = 600.0,
        behind: int | None = None,
    ) -> Played:
        """Publish ``shots`` (at ``rate`` per second, or ``gap`` seconds apart), then wait until the shots of
        index ``until`` are answered (at most ``timeout`` s, or until the node exits) and then until answers
        stop coming for ``settle`` seconds. Stamps are assigned here, unique across calls.

        ``behind``: a sender that waits for answers, as a user's request-and-wait loop does: after publishing shot
        k it waits (at most ``timeout`` s, then goes on) until every shot up to k - ``behind`` is answered before
        the next (0: the answer of the shot it just sent; a node that answers a frame N frames late needs N)."""
        played = Played()
        with self._lock:
            self._stamps = {}
            self._played = played
        start = time.perf_counter()
        for index, shot in enumerate(shots):
            stamp = (self._next_stamp, index)
            self._next_stamp += 1
            shot.message.header.stamp.sec, shot.message.header.stamp.nanosec = stamp
            with self._lock:
                self._stamps[stamp] = index
            if rate:
                delay = index / rate - (time.perf_counter() - start)
                if delay > 0:
                    time.sleep(delay)
            else:
                time.sleep(gap)
            self.publisher.publish(shot.message)
            if behind is not None:
                self.wait_answered(range(index + 1 - behind), timeout)
        self.wait_answered(until, timeout)
        self.wait_quiet(settle)
        return played

    def wait_answered(self, indexes: Collection[int], timeout: float) -> None:
        """Return once the shots of ``indexes`` are answered, the node has exited, or after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not set(indexes) <= self._played.answers.keys() and self.process.poll() is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._lock.wait(timeout=min(left, 1.0))

    def wait_quiet(self, settle: float) -> None:
        """Return once no answer came for ``settle`` seconds."""
        with self._lock:
            while True:
                before = len(self._played.answers) + self._played.duplicates + self._played.strangers
                self._lock.wait(timeout=settle)
                if len(self._played.answers) + self._played.duplicates + self._played.strangers == before:
                    return

    def memory_kib(self) -> dict[str, int]:
        return memory_kib(self.process.pid)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> int:
        """SIGTERM the node, wait for it, close the player; the node's exit code."""
        if self.process.poll() is None:
            self.process.terminate()
        try:
            code = self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self._log.close()
        self.executor.shutdown()
        self._spinner.join(timeout=5)  # a spinning thread left inside rclpy at interpreter exit can abort the process
        self.node.destroy_node()
        import rclpy

        rclpy.try_shutdown(context=self.context)
        return code
