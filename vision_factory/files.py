"""Output files written safely, for every tool and the generator: never through a symbolic link, never onto one
of the command's inputs, and all or nothing.

A file is written under a new name of its own in the folder it belongs in (created with O_EXCL | O_NOFOLLOW, or
inside a new private folder there when a library writes it by path), then renamed onto its name: a rename
replaces the name and never writes through what was there. A symbolic link already at the name, dangling or not,
is refused with an error rather than replaced, as is a folder, and a name that is one of the command's inputs
(compared by identity, device and inode, so a hard link or another spelling of the path is caught too; an
OpenVINO model stands for its .xml and its .bin).

A small input file (a tokenizer, a list of names) is read by ``read_limited``: a regular file only, never more than
its bound.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from .text import shown_path

NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

Inputs = Iterable["str | os.PathLike[str] | None"]


class UnsafeWrite(ValueError):
    """An output that would be written through a link or onto an input: the message names the file and the fix."""


def model_files(path: str | os.PathLike[str]) -> list[Path]:
    """The files a model path stands for: an OpenVINO IR is its .xml and the .bin beside it."""
    path = Path(path)
    return [path, path.with_suffix(".bin")] if path.suffix == ".xml" else [path]


def _identities(inputs: Inputs) -> dict[tuple[int, int], Path]:
    """(device, inode) -> path of each input that exists (through links: the file the input names)."""
    found = {}
    for given in inputs:
        if given is None:
            continue
        for path in model_files(given):
            try:
                status = os.stat(path)
            except OSError:
                continue
            found.setdefault((status.st_dev, status.st_ino), path)
    return found


def check_output(path: str | os.PathLike[str], inputs: Inputs = (), option: str | None = None) -> Path:
    """``path`` if a file may be written there; else UnsafeWrite naming it, what is there, and the fix.

    Refused: a symbolic link (dangling or not: the write would land wherever it points), a folder or other
    non-file, and any of ``inputs`` (by identity: a hard link to an input is that input). ``option`` names the
    option that chose the path, for the fix.
    """
    path = Path(path)
    where = _another(option)
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return path
    except OSError as exc:
        raise UnsafeWrite(f"cannot write {shown_path(path)}: {exc.strerror}; {where}") from None
    if stat.S_ISLNK(status.st_mode):
        raise UnsafeWrite(_link_refusal(path, option))
    if not stat.S_ISREG(status.st_mode):
        raise UnsafeWrite(f"{shown_path(path)} exists and is not a file; remove it or {where}")
    source = _identities(inputs).get((status.st_dev, status.st_ino))
    if source is not None:
        same = "" if os.path.abspath(source) == os.path.abspath(path) else f" (the same file as {shown_path(source)})"
        raise UnsafeWrite(f"{shown_path(path)} is an input of this command{same}; it is never overwritten: {where}")
    return path


def check_outputs(paths: Iterable[str | os.PathLike[str]], inputs: Inputs = (), option: str | None = None) -> None:
    """check_output for each of ``paths`` (e.g. before a long run whose outputs are written at its end)."""
    inputs = list(inputs)
    for path in paths:
        check_output(path, inputs, option)


class Stage:
    """``path``'s content written at ``fresh`` (by any library that writes by path), in a new private folder beside
    ``path``, until ``publish`` moves it onto its name; what is never published is removed with the folder. ``stage``
    makes one; ``staged`` publishes it as ``path`` when its block ends without error."""

    def __init__(self, path: Path, inputs: list, option: str | None, companions: Iterable[str]):
        self.path, self.inputs, self.option, self.companions = path, inputs, option, tuple(companions)
        check_outputs(self._files(path), inputs, option)
        self.folder = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            os.mkdir(self.folder, 0o700)
        except OSError as exc:
            raise UnsafeWrite(f"cannot write in {shown_path(path.parent)}: {exc.strerror}; {_fix(option)}") from None
        self.fresh = self.folder / path.name  # ``path``'s name: libraries choose the format by the suffix

    def _files(self, path: Path) -> list[Path]:
        """``path``'s companions (each suffix of ``companions`` on its name), then ``path``."""
        return [*(path.with_suffix(suffix) for suffix in self.companions), path]

    def publish(self, path: str | os.PathLike[str] | None = None) -> Path:
        """The written files moved onto ``path`` (default: the staged name; another name must have been checked,
        e.g. with check_outputs, before the work), companions first; each name checked again just before."""
        path = self.path if path is None else Path(path)
        targets = self._files(path)
        for target in targets:
            check_output(target, self.inputs, self.option)  # again: something may have been put there meanwhile
        for written, target in zip(self._files(self.fresh), targets):
            os.replace(written, target)
        return path


@contextlib.contextmanager
def stage(
    path: str | os.PathLike[str],
    inputs: Inputs = (),
    option: str | None = None,
    companions: Iterable[str] = (),
) -> Iterator[Stage]:
    """A Stage for ``path`` (checked first: check_output for it and its companions), whose files are removed when
    the block ends unless published: a result checked before it is published (quantize's model, compared first)
    is never left under its name when the check fails."""
    staging = Stage(Path(path), list(inputs), option, companions)
    try:
        yield staging
    finally:
        shutil.rmtree(staging.folder, ignore_errors=True)


@contextlib.contextmanager
def staged(
    path: str | os.PathLike[str],
    inputs: Inputs = (),
    option: str | None = None,
    companions: Iterable[str] = (),
) -> Iterator[Path]:
    """A fresh path to write ``path``'s content at (by any library that writes by path: cv2.imwrite, onnx.save,
    savefig ...), moved onto ``path`` when the block ends without error and removed otherwise.

    The fresh path has ``path``'s name (libraries choose the format by the suffix) in a new private folder beside
    ``path``. ``companions``: suffixes of files the library writes beside it (OpenVINO's .bin beside the .xml),
    each checked and moved as well, before the main file.
    """
    with stage(path, inputs, option, companions) as staging:
        yield staging.fresh
        staging.publish()


def _fix(option: str | None) -> str:
    return f"choose another {option}" if option else "choose a writable output folder"


def _another(option: str | None) -> str:
    return f"choose another {option}" if option else "choose another output folder"


def _new_beside(path: Path, option: str | None) -> tuple[int, Path]:
    """A new file (descriptor, path) of an unpredictable name in ``path``'s folder, created never through a link."""
    for _ in range(100):
        fresh = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(fresh, NEW_FILE_FLAGS, 0o666), fresh
        except FileExistsError:
            continue
        except OSError as exc:
            raise UnsafeWrite(f"cannot write {shown_path(path)}: {exc.strerror}; {_fix(option)}") from None
    raise UnsafeWrite(f"cannot write {shown_path(path)}: every temporary name tried beside it exists")


def write_bytes(path: str | os.PathLike[str], data: bytes, inputs: Inputs = (), option: str | None = None) -> Path:
    """``data`` as the file ``path``, all or nothing, never through a link nor onto one of ``inputs``."""
    path = check_output(path, inputs, option)
    fd, fresh = _new_beside(path, option)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        check_output(path, inputs, option)
        os.replace(fresh, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(fresh)
        raise
    return path


def write_text(
    path: str | os.PathLike[str], text: str, inputs: Inputs = (), option: str | None = None, encoding: str = "utf-8"
) -> Path:
    """``text`` as the file ``path`` (write_bytes' guarantees)."""
    return write_bytes(path, text.encode(encoding), inputs, option)


def open_new(
    path: str | os.PathLike[str], inputs: Inputs = (), option: str | None = None, mode: str = "w", **kwargs
) -> IO:
    """``path`` opened for writing as a new, empty file (a log written as it goes): made under a fresh name and
    renamed onto ``path`` at once, so an earlier file is replaced, never truncated, and no link is followed."""
    if mode not in ("w", "wb"):
        raise ValueError(f"open_new writes new files: mode 'w' or 'wb', not {mode!r}")
    path = check_output(path, inputs, option)
    fd, fresh = _new_beside(path, option)
    try:
        check_output(path, inputs, option)
        os.replace(fresh, path)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(fresh)
        raise
    return os.fdopen(fd, mode, **kwargs)


# --- output folders: the one the user named, and the folders made below it (a camera's OUT/NAME/) ------------


def output_folder(root: str | os.PathLike[str], below: str = "", option: str | None = None) -> Path:
    """The folder ``root``/``below`` for a command's outputs, made where missing, never through a link below ``root``.

    ``root`` is the folder the user named (``option``: the option that named it, for the fix): made with its
    parents where missing, as ``mkdir -p`` makes them (a link on the path the user typed is theirs to follow); a file
    there or above it is refused. Each component of ``below`` (relative: a camera's ``front`` or ``rig/front``) is
    then made with mkdir, which never follows a link, or, where it exists, looked at with lstat: a symbolic link
    (dangling or not) or anything but a folder at any component is refused (UnsafeWrite naming it and the fix), so
    that nothing meant for ``root``/``below`` lands where a planted link points."""
    root = Path(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UnsafeWrite(_not_a_folder(root, option)) from None
    except NotADirectoryError:
        raise UnsafeWrite(_under_a_file(root, option)) from None
    except OSError as exc:
        raise UnsafeWrite(_cannot_make(root, exc, option)) from None
    return _below(root, below, option, make=True)


def check_folder(root: str | os.PathLike[str], below: str = "", option: str | None = None) -> Path:
    """``root``/``below`` as ``output_folder`` would give it, making nothing: an UnsafeWrite for a link or a
    non-folder at any existing component below ``root``, or for ``root`` under a file (before a run reads or
    removes an earlier run's files there). Components that do not exist yet are left to ``output_folder``."""
    root = Path(root)
    if not root.is_dir() and (root.exists() or root.is_symlink()):
        raise UnsafeWrite(_not_a_folder(root, option))
    if not root.exists() and _file_above(root) is not None:
        raise UnsafeWrite(_under_a_file(root, option))
    return _below(root, below, option, make=False)


def _below(root: Path, below: str, option: str | None, make: bool) -> Path:
    parts = Path(below).parts
    if Path(below).is_absolute() or ".." in parts:
        raise ValueError(f"{below!r} is not a relative path below the output folder")
    folder = root
    for part in parts:
        folder = folder / part
        if make:
            try:
                os.mkdir(folder)  # never follows a link: anything at that name, a dangling link included, fails it
                continue
            except FileExistsError:
                pass
            except OSError as exc:
                raise UnsafeWrite(_cannot_make(folder, exc, option)) from None
        try:
            status = os.lstat(folder)
        except FileNotFoundError:
            if make:  # removed between mkdir and lstat: something is changing the output folder
                raise UnsafeWrite(f"{shown_path(folder)} vanished while it was made; try again") from None
            return root / below  # the rest is made later, by output_folder
        if stat.S_ISLNK(status.st_mode):
            raise UnsafeWrite(_link_refusal(folder, option))
        if not stat.S_ISDIR(status.st_mode):
            raise UnsafeWrite(f"{shown_path(folder)} exists and is not a folder; remove it or {_another(option)}")
    return folder


def _link_refusal(path: Path, option: str | None) -> str:
    target = shown_path(os.readlink(path))
    return (
        f"{shown_path(path)} is a symbolic link (to {target}); outputs are never written through links: remove the "
        f"link or {_another(option)}"
    )


def _cannot_make(folder: Path, exc: OSError, option: str | None) -> str:
    return f"cannot write the folder {shown_path(folder)}: {exc.strerror}; {_fix(option)}"


def _not_a_folder(root: Path, option: str | None) -> str:
    what = "is a file, not a folder" if root.is_file() else "exists and is not a folder"
    return f"{shown_path(root)} {what}: {_another(option)}"


def _file_above(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` that is not a folder (a file the path would go under), or None."""
    for parent in [path, *path.parents]:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


def _under_a_file(path: Path, option: str | None) -> str:
    above = _file_above(path)
    where = f" ({shown_path(above)} is a file, not a folder)" if above is not None and above != path else ""
    return f"cannot write the folder {shown_path(path)}: it would be under a file{where}; {_another(option)}"


# --- a tree of new files under one folder, reached by descriptors (the generator's package) -----------------


class Folder:
    """A directory held open by descriptor, with its subfolders opened (never through a link) as needed."""

    def __init__(self, fd: int):
        self.fd = fd
        self._children: dict[str, Folder] = {}

    def folder(self, name: str) -> Folder:
        """The subfolder ``name``, made if missing; a link or file there is an error."""
        if name not in self._children:
            try:
                os.mkdir(name, dir_fd=self.fd)
            except FileExistsError:
                pass  # O_NOFOLLOW below refuses it unless it is a real folder
            self._children[name] = Folder(os.open(name, DIRECTORY_FLAGS, dir_fd=self.fd))
        return self._children[name]

    def close(self) -> None:
        for child in self._children.values():
            child.close()
        os.close(self.fd)

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def write_new(dir_fd: int, name: str, content: str | bytes) -> None:
    """A new file ``name`` in the folder ``dir_fd``: refused if anything, a link included, has that name."""
    fd = os.open(name, NEW_FILE_FLAGS, 0o666, dir_fd=dir_fd)
    with os.fdopen(fd, "wb") as file:
        file.write(content.encode() if isinstance(content, str) else content)


class UnreadableFile(ValueError):
    """A small input file that cannot be read: the message is what is wrong, for the caller to name the file and
    the fix around ("is not a regular file", "is larger than 1048576 bytes", "cannot be read (Permission
    denied)")."""


def read_limited(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file at ``path`` if it holds at most ``limit``; else UnreadableFile. Opened without
    blocking (a FIFO's open would wait for a writer) and never read past ``limit`` + 1 bytes (a device such as
    /dev/zero would be read forever)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise UnreadableFile(f"cannot be read ({error.strerror or error})") from None
    with os.fdopen(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise UnreadableFile("is not a regular file")
        try:
            data = file.read(limit + 1)
        except OSError as error:
            raise UnreadableFile(f"cannot be read ({error.strerror or error})") from None
    if len(data) > limit:
        raise UnreadableFile(f"is larger than {limit} bytes")
    return data
