"""vision-factory generate writes only inside --out, never through a symbolic link, and only under valid names.

The names the generator writes or stages (package.py write_package): OUT/PACKAGE, OUT/PACKAGE.zip, a
staging folder OUT/.PACKAGE-<random> holding PACKAGE/, PACKAGE.zip and .replaced (the old package
under --force); before this check existed it also wrote OUT/PACKAGE.zip.partial. Links to a folder and
to a file outside --out are planted at each of them, for plain, --force and --zip runs.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from vision_factory.cli import main
from vision_factory.files import Folder
from vision_factory.generator.package import GeneratorError, check_package_name
from vision_factory.generator.writing import _make_staging, _stage_package, _write_tree, _write_zip

PACKAGE = "court_tracker"
MODES = {"plain": [], "force": ["--force"], "zip": ["--zip"], "force_zip": ["--force", "--zip"]}
RULE = (
    "The rule (REP 144): lowercase letters, digits and single underscores between them (no double or trailing "
    "underscore), starting with a letter, 2 to 50 characters"
)
LINK_REFUSED = "is a symbolic link; the generator never writes through links"


def _generate(out: Path, *extra: str, package: str = PACKAGE):
    arguments = ["--model", "tracknet", "--backend", "onnx", "--package-name", package, "--out", str(out)]
    return CliRunner().invoke(main, ["generate", *arguments, *extra])


def _snapshot(folder: Path) -> dict[str, object]:
    """Every entry under ``folder`` (links not followed): its kind and content."""
    found: dict[str, object] = {}
    for path in sorted(folder.rglob("*")):
        relative = str(path.relative_to(folder))
        if path.is_symlink():
            found[relative] = ("link", os.readlink(path))
        elif path.is_dir():
            found[relative] = ("dir", path.stat().st_mode)
        else:
            found[relative] = ("file", path.read_bytes(), path.stat().st_mode)
    return found


@pytest.fixture
def outside(tmp_path) -> Path:
    """A folder outside --out, holding a file, that nothing may change."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "precious.txt").write_text("keep me")
    return folder


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["folder", "file"])
@pytest.mark.parametrize("name", [PACKAGE, f"{PACKAGE}.zip", f"{PACKAGE}.zip.partial"])
def test_a_link_at_a_name_the_generator_writes_is_never_followed(tmp_path, outside, name, kind, mode):
    out = tmp_path / "out"
    out.mkdir()
    link_target = outside if kind == "folder" else outside / "precious.txt"
    (out / name).symlink_to(link_target)
    before = _snapshot(outside)
    result = _generate(out, *MODES[mode])
    used = name == PACKAGE or (name == f"{PACKAGE}.zip" and "--zip" in MODES[mode])
    if used:  # refused, with the reason
        assert result.exit_code != 0, result.output
        assert f"{out / name} {LINK_REFUSED}" in result.output, result.output
        assert not (out / PACKAGE).exists() or (out / PACKAGE).is_symlink()
    else:  # a name it does not write: left alone
        assert result.exit_code == 0, result.output
        assert (out / PACKAGE / "package.xml").is_file() and not (out / PACKAGE).is_symlink()
    assert _snapshot(outside) == before
    assert (out / name).is_symlink() and os.readlink(out / name) == str(link_target)
    assert [path.name for path in out.iterdir() if path.name.startswith(".")] == []  # no staging left


@pytest.mark.parametrize("mode", ["force", "force_zip"])
def test_links_inside_a_replaced_package_are_removed_not_followed(tmp_path, outside, mode):
    out = tmp_path / "out"
    assert _generate(out).exit_code == 0
    (out / PACKAGE / "package.xml").unlink()
    (out / PACKAGE / "package.xml").symlink_to(outside / "precious.txt")
    (out / PACKAGE / PACKAGE / "__init__.py").unlink()
    (out / PACKAGE / PACKAGE / "__init__.py").symlink_to(outside / "precious.txt")
    (out / PACKAGE / "launch").rename(tmp_path / "launch_moved")
    (out / PACKAGE / "launch").symlink_to(outside)
    before = _snapshot(outside)
    result = _generate(out, *MODES[mode])
    assert result.exit_code == 0, result.output
    assert _snapshot(outside) == before
    written = _snapshot(out / PACKAGE)
    assert not [path for path, entry in written.items() if entry[0] == "link"]
    assert b"<package" in (out / PACKAGE / "package.xml").read_bytes()
    assert (out / PACKAGE / "launch" / "tracknet_onnx.launch.py").is_file()


def test_an_existing_zip_needs_force_and_a_folder_there_is_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / f"{PACKAGE}.zip").write_bytes(b"mine")
    refused = _generate(out, "--zip")
    assert refused.exit_code != 0 and f"{PACKAGE}.zip already exists; pass --force" in refused.output
    assert (out / f"{PACKAGE}.zip").read_bytes() == b"mine" and not (out / PACKAGE).exists()
    assert _generate(out, "--zip", "--force").exit_code == 0
    assert (out / f"{PACKAGE}.zip").read_bytes()[:2] == b"PK"
    (out / f"{PACKAGE}.zip").unlink()
    (out / f"{PACKAGE}.zip").mkdir()
    folder = _generate(out, "--zip", "--force")
    assert folder.exit_code != 0 and f"{PACKAGE}.zip is a folder" in folder.output


def test_the_zip_holds_the_package(tmp_path):
    import zipfile

    out = tmp_path / "out"
    assert _generate(out, "--zip").exit_code == 0
    with zipfile.ZipFile(out / f"{PACKAGE}.zip") as bundle:
        names = set(bundle.namelist())
        assert bundle.read(f"{PACKAGE}/package.xml") == (out / PACKAGE / "package.xml").read_bytes()
    on_disk = {f"{PACKAGE}/{path.relative_to(out / PACKAGE)}" for path in (out / PACKAGE).rglob("*") if path.is_file()}
    assert names == on_disk


@pytest.mark.parametrize("kind", ["folder", "file"])
@pytest.mark.parametrize("where", ["package.xml", "launch", f"{PACKAGE}/runtime"])
def test_a_link_planted_inside_the_staging_folder_is_not_followed(tmp_path, outside, kind, where):
    # The staging folder's name is unpredictable, so a link can only appear there by a race: write into a
    # folder that already holds one, as such a race would leave it.
    staging = tmp_path / "staging"
    staging.mkdir()
    *parents, name = f"{PACKAGE}/{where}".split("/")
    staging.joinpath(*parents).mkdir(parents=True)
    staging.joinpath(*parents, name).symlink_to(outside if kind == "folder" else outside / "precious.txt")
    before = _snapshot(outside)
    files = {"package.xml": "<package/>", "launch/x.launch.py": "", f"{PACKAGE}/runtime/runner.py": "x = 1\n"}
    with Folder(os.open(staging / PACKAGE, os.O_RDONLY | os.O_DIRECTORY)) as folder:
        with pytest.raises(OSError) as raised:
            _write_tree(folder, files)
    assert isinstance(raised.value, FileExistsError | NotADirectoryError) or raised.value.errno == errno.ELOOP
    assert _snapshot(outside) == before


def test_staging_refuses_a_link_at_the_package_or_zip_name(tmp_path, outside):
    staging = tmp_path / "staging"
    staging.mkdir()
    (staging / PACKAGE).symlink_to(outside)
    (staging / f"{PACKAGE}.zip").symlink_to(outside / "precious.txt")
    before = _snapshot(outside)
    with Folder(os.open(staging, os.O_RDONLY | os.O_DIRECTORY)) as folder:
        with pytest.raises(FileExistsError):
            _stage_package(folder, PACKAGE, {"package.xml": "<package/>"})
        with pytest.raises(FileExistsError):
            _write_zip(folder.fd, f"{PACKAGE}.zip", PACKAGE, {"package.xml": "<package/>"})
    assert _snapshot(outside) == before


def test_staging_folders_are_private_and_unpredictable(tmp_path):
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        names = {_make_staging(fd, PACKAGE, tmp_path) for _ in range(5)}
    finally:
        os.close(fd)
    assert len(names) == 5 and all(name.startswith(f".{PACKAGE}-") and len(name) > len(PACKAGE) + 10 for name in names)
    assert all((tmp_path / name).stat().st_mode & 0o777 == 0o700 for name in names)


VALID_NAMES = ["ab", "court_tracker", "a1", "tracker2_v3", "x" * 50]
INVALID_NAMES = [
    ("", "at least two characters"),
    ("a", "at least two characters"),
    ("x" * 51, "at most 50 characters"),
    ("Court_Tracker", "only lowercase letters, digits and underscores"),
    ("court-tracker", "only lowercase letters, digits and underscores"),
    ("court.tracker", "only lowercase letters, digits and underscores"),
    ("../escape", "only lowercase letters, digits and underscores"),
    ("court tracker", "only lowercase letters, digits and underscores"),
    ("court\ttracker", "only lowercase letters, digits and underscores"),
    ("court_tracker\n", "only lowercase letters, digits and underscores"),
    ("court\ntracker", "only lowercase letters, digits and underscores"),
    ("court\x1b[31mtracker", "only lowercase letters, digits and underscores"),
    ("court\u2028tracker", "only lowercase letters, digits and underscores"),
    ("trackér", "only lowercase letters, digits and underscores"),
    ("1tracker", "starting with a letter"),
    ("_tracker", "starting with a letter"),
    ("court__tracker", "no double underscore"),
    ("court_tracker_", "no trailing underscore"),
    ("json", "it would shadow a Python keyword or module"),
    ("vision_factory", "it would shadow a Python keyword or module"),
]


@pytest.mark.parametrize("name", VALID_NAMES)
def test_valid_package_names(name):
    check_package_name(name)


@pytest.mark.parametrize("name,problem", INVALID_NAMES)
def test_invalid_package_names_are_refused_with_the_rule(name, problem):
    with pytest.raises(GeneratorError) as raised:
        check_package_name(name)
    message = str(raised.value)
    assert f"is not a valid ROS package name: {problem}" in message and RULE in message, message
    assert message.isprintable(), message  # the refused name is escaped: no newline, tab or escape code


@pytest.mark.parametrize("name", ["court_tracker\n", "court tracker", "../escape", "court\x1b[2Jtracker"])
def test_the_command_refuses_bad_names_and_writes_nothing(tmp_path, name):
    out = tmp_path / "out"
    result = _generate(out, "--zip", package=name)
    assert result.exit_code != 0 and "is not a valid ROS package name" in result.output and RULE in result.output
    assert "\x1b" not in result.output and result.output.count("\n") <= 2, result.output
    assert not out.exists() or list(out.iterdir()) == []
    assert [path.name for path in tmp_path.iterdir()] == ["out"] or not out.exists()
