"""Write a generated package (package.py's ``package_files``) safely: all of it or nothing, never through a link,
built in a staging folder inside ``out`` and renamed into place (``write_package``)."""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
import time
import zipfile
from pathlib import Path

from ..files import DIRECTORY_FLAGS, NEW_FILE_FLAGS, Folder, UnsafeWrite, output_folder, write_new
from ..text import shown_path, untrusted
from .package import GeneratorError, package_files


def write_package(
    family_name: str,
    backend_name: str,
    package: str,
    out: Path,
    force: bool = False,
    make_zip: bool = False,
    model: Path | None = None,
    **about: str,
) -> Path:
    """Write the package to out/<package> (and out/<package>.zip): all of it, or nothing.

    Nothing is ever written through a symbolic link under ``out``: everything is built in a fresh
    staging folder of an unpredictable name made inside ``out`` (mkdir, which never follows a link),
    reached only through directory descriptors, its files created with O_EXCL | O_NOFOLLOW; the
    finished package and zip are then renamed into place (a rename replaces a name, it never
    writes through a link). A link at out/<package> or out/<package>.zip is refused.
    """
    files = package_files(family_name, backend_name, package, model, **about)
    try:
        out = output_folder(out, option="--out")  # a file there or above it refused, by name
    except UnsafeWrite as exc:
        raise GeneratorError(str(exc)) from None
    try:
        out = out.resolve()
        out_fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise GeneratorError(f"cannot write to {shown_path(out)}: {exc.strerror}; choose a writable --out") from exc
    try:
        names = [package, *([f"{package}.zip"] if make_zip else [])]
        existing = [name for name in names if _check_target(out_fd, out / name)]
        if existing and not force:
            raise GeneratorError(f"{shown_path(out / existing[0])} already exists; pass --force to replace it")
        staging = _make_staging(out_fd, package, out)
        try:
            with Folder(os.open(staging, DIRECTORY_FLAGS, dir_fd=out_fd)) as folder:
                _check_ours(folder.fd, out / staging)
                _stage_package(folder, package, files)
                if make_zip:
                    _write_zip(folder.fd, f"{package}.zip", package, files)
                _move_into_place(folder.fd, out_fd, out, staging, package, make_zip)
        except _Kept:
            raise
        except BaseException as exc:
            shutil.rmtree(staging, dir_fd=out_fd, ignore_errors=True)
            if isinstance(exc, OSError):
                raise GeneratorError(_write_error(out, exc)) from exc
            raise
        shutil.rmtree(staging, dir_fd=out_fd, ignore_errors=True)
    finally:
        os.close(out_fd)
    return out / package


def _write_error(out: Path, exc: OSError) -> str:
    where = f"{untrusted(exc.filename)} in {shown_path(out)}" if exc.filename else shown_path(out)
    if exc.errno in (errno.ELOOP, errno.EEXIST, errno.ENOTDIR):  # O_NOFOLLOW, O_EXCL or mkdir met something there
        return f"cannot write {where}: something, maybe a symbolic link, appeared there while writing; try again"
    return f"cannot write {where}: {exc.strerror or exc}; choose a writable --out"


def _write_tree(folder: Folder, files: dict[str, str | bytes]) -> None:
    """``files``, by path relative to ``folder``, written as new files; a link met on the way is an error."""
    for relative, content in files.items():
        *parents, name = relative.split("/")
        parent = folder
        for part in parents:
            parent = parent.folder(part)
        write_new(parent.fd, name, content)


def _stage_package(staging: Folder, package: str, files: dict[str, str | bytes]) -> None:
    """The package as the new folder ``package`` of the staging folder."""
    os.mkdir(package, dir_fd=staging.fd)  # fails on anything already there, a link included
    _write_tree(staging.folder(package), files)


def _write_zip(dir_fd: int, name: str, package: str, files: dict[str, str | bytes]) -> None:
    """The package's files as package/<path> in a new zip file ``name`` of the folder ``dir_fd``."""
    fd = os.open(name, NEW_FILE_FLAGS, 0o666, dir_fd=dir_fd)
    now = time.localtime()[:6]
    with os.fdopen(fd, "wb") as file, zipfile.ZipFile(file, "w", zipfile.ZIP_DEFLATED) as bundle:
        for relative in sorted(files):
            entry = zipfile.ZipInfo(f"{package}/{relative}", date_time=now)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            content = files[relative]
            bundle.writestr(entry, content.encode() if isinstance(content, str) else content)


def _check_target(out_fd: int, path: Path) -> bool:
    """Whether ``path`` (a name in --out) exists; an error when it is a link or a folder where a file goes."""
    try:
        status = os.lstat(path.name, dir_fd=out_fd)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(status.st_mode):
        raise GeneratorError(
            f"{shown_path(path)} is a symbolic link; the generator never writes through links: remove it or choose "
            "another --out"
        )
    if path.suffix == ".zip" and stat.S_ISDIR(status.st_mode):
        raise GeneratorError(f"{shown_path(path)} is a folder; remove it or choose another --out")
    return True


def _make_staging(out_fd: int, package: str, out: Path) -> str:
    """A new private folder in --out, of an unpredictable name; mkdir never follows a link planted there."""
    for _ in range(100):
        name = f".{package}-{secrets.token_hex(8)}"
        try:
            os.mkdir(name, 0o700, dir_fd=out_fd)
            return name
        except FileExistsError:
            continue
    raise GeneratorError(f"cannot make a staging folder in {shown_path(out)}: every name tried exists")


def _check_ours(fd: int, path: Path) -> None:
    """The staging folder opened is the private one just made, not one swapped in since."""
    status = os.fstat(fd)
    if status.st_uid != os.geteuid() or stat.S_IMODE(status.st_mode) & 0o077:
        raise GeneratorError(f"{shown_path(path)} changed while the package was written; try again")


def _move_into_place(staging_fd: int, out_fd: int, out: Path, staging: str, package: str, make_zip: bool) -> None:
    """Rename the staged package (and zip) into --out; an old package goes only once the new one is in place."""
    old = ".replaced"  # no package name starts with a dot
    try:
        os.rename(package, old, src_dir_fd=out_fd, dst_dir_fd=staging_fd)
    except FileNotFoundError:
        old = ""
    try:
        os.rename(package, package, src_dir_fd=staging_fd, dst_dir_fd=out_fd)
    except OSError as exc:
        if old:
            try:
                os.rename(old, package, src_dir_fd=staging_fd, dst_dir_fd=out_fd)
            except OSError as failed:
                raise _Kept(
                    f"{out / package} changed while it was replaced; the old one is in {out / staging / old}"
                ) from failed
        raise exc
    if make_zip:
        os.rename(f"{package}.zip", f"{package}.zip", src_dir_fd=staging_fd, dst_dir_fd=out_fd)


class _Kept(GeneratorError):
    """The staging folder holds the only copy of something: it is not removed."""
