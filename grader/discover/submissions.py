"""Finding the notebooks to grade, as LMS exports give them: files, folders, Canvas downloads, zips.

Discovery is the first stage: it turns what the instructor points at into :class:`Found`
submissions, each with the id its results are filed under, and says in plain sentences
(:attr:`Discovery.notices`) what it skipped or decided on the way. Student uploads are
untrusted, so zips are extracted by hand, member by member: nothing is written outside the
extraction folder, links are never created, and sizes are capped against zip bombs.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
import zipfile
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from grader.errors import UsageError

LAYOUTS = ("auto", "paths", "per-student", "canvas")
# Never searched, in folders or in zips: tool caches, version control, macOS resource forks.
SKIPPED_FOLDERS = frozenset({".ipynb_checkpoints", "__pycache__", ".git", "__MACOSX"})
NOTEBOOK_SUFFIX = ".ipynb"
ARCHIVE_SUFFIX = ".zip"

MAX_ZIP_MEMBERS = 10_000
MAX_ZIP_TOTAL_BYTES = 2 * 1024**3
MAX_ZIP_MEMBER_BYTES = 500 * 1024**2
COPY_CHUNK_BYTES = 1024**2

# Canvas's bulk download: lastfirst_[LATE_]userid_submissionid_originalname (lastfirst has no
# underscores; originalname may, and may end in a re-upload suffix such as "-1").
CANVAS_NAME = re.compile(r"(?P<name>[^_]+)_(?:(?P<late>LATE)_)?(?P<student>\d+)_(?P<submission>\d+)_(?P<original>.+)")

# Errors reading one zip member can raise: corrupt data, a bad CRC, an unsupported method.
_MEMBER_READ_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ValueError, OSError)


@dataclass(frozen=True)
class Found:
    """A notebook to grade, the id its results are filed under, and who submitted it."""

    submission_id: str  # unique within a run; the output folder OUT/<submission_id>/ (may contain '/')
    path: Path  # the notebook to grade (for zips: the extracted copy)
    student: str | None = None  # the LMS student id, when the layout gives one
    name: str | None = None  # the student's name as the LMS wrote it (Canvas 'lastfirst'), when known
    late: bool = False  # Canvas marks late submissions with _LATE_
    origin: str = ""  # where it came from, for messages: the path, or "archive.zip:inner/path.ipynb"


@dataclass(frozen=True)
class Discovery:
    """Every submission found, what was skipped or decided on the way, and the layout used."""

    found: list[Found]
    notices: list[str]  # human-readable sentences: duplicates, skipped zip members, the layout chosen...
    layout: str  # "paths", "per-student" or "canvas"


@dataclass(frozen=True)
class ZipLimits:
    """How much one zip may hold before it is treated as a zip bomb."""

    members: int = MAX_ZIP_MEMBERS  # entries in the archive, of any kind
    total_bytes: int = MAX_ZIP_TOTAL_BYTES  # uncompressed bytes extracted from the archive
    member_bytes: int = MAX_ZIP_MEMBER_BYTES  # uncompressed bytes of one member


DEFAULT_ZIP_LIMITS = ZipLimits()


@dataclass(frozen=True)
class _Notebook:
    """A notebook found, before a layout names it."""

    path: Path
    relative: PurePosixPath  # under the input it came from; a zip counts as a folder named by its stem
    origin: str
    source: int  # the index of the input it came from
    loose: bool  # a file given directly rather than found in a folder


@dataclass(frozen=True)
class _Named:
    """What a layout makes of one notebook: its id before de-duplication and its student."""

    base_id: str
    group: tuple[str, str]  # notebooks of one group belong to one student (or share one id)
    student: str | None = None
    name: str | None = None
    late: bool = False


class _ArchiveOverflow(Exception):
    """A zip member inflated past the bytes it was allowed."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.limit = limit


def find_submissions(
    paths: Sequence[Path],
    layout: str = "auto",
    extract_to: Path | None = None,
    *,
    zip_limits: ZipLimits = DEFAULT_ZIP_LIMITS,
) -> Discovery:
    """The notebooks under the given files, folders and zips, named by ``layout`` (unique, sorted ids)."""
    if layout not in LAYOUTS:
        raise UsageError(f"unknown layout {layout!r}; expected one of {', '.join(LAYOUTS)}")
    inputs = [Path(path) for path in paths]
    if not inputs:
        raise UsageError("no files or folders to grade were given")
    for given in inputs:
        if not given.exists():
            raise UsageError(f"{given} does not exist")
    notices: list[str] = []
    notebooks: list[_Notebook] = []
    for source, given in enumerate(inputs):
        notebooks += _collect(given, source, extract_to, zip_limits, notices)
    if not notebooks:
        where = ", ".join(str(given) for given in inputs)
        verb = "holds" if len(inputs) == 1 else "hold"
        message = f"{where} {verb} no .ipynb notebooks (give a notebook, a folder of notebooks or a zip of them)"
        # The notices that only repeat "X holds no .ipynb notebooks" add nothing to this message.
        news = [notice for notice in notices if not any(notice == f"{given} holds no .ipynb notebooks" for given in inputs)]
        if news:
            message += ":\n" + "\n".join(f"  - {notice}" for notice in news)
        raise UsageError(message)
    notebooks.sort(key=lambda notebook: (notebook.source, notebook.relative.parts))
    if layout == "auto":
        layout = _detect_layout(notebooks, inputs, notices)
    named = [_name(notebook, layout, notices) for notebook in notebooks]
    ids = _unique_ids(notebooks, named, notices)
    found = [
        Found(
            submission_id=submission_id,
            path=notebook.path,
            student=naming.student,
            name=naming.name,
            late=naming.late,
            origin=notebook.origin,
        )
        for notebook, naming, submission_id in zip(notebooks, named, ids, strict=True)
    ]
    return Discovery(found=found, notices=notices, layout=layout)


# --- finding files ----------------------------------------------------------------------------


def _collect(given: Path, source: int, extract_to: Path | None, zip_limits: ZipLimits, notices: list[str]) -> list[_Notebook]:
    """The notebooks one input holds: itself, the notebooks under a folder, or those of a zip."""
    if given.is_dir():
        notebooks: list[_Notebook] = []
        for path in _walk(given, notices, exclude=extract_to):
            relative = PurePosixPath(path.relative_to(given).as_posix())
            if _is_archive(path.name):
                notebooks += _from_archive(path, relative.with_suffix(""), source, extract_to, zip_limits, notices)
            else:
                notebooks.append(_Notebook(path, relative, str(path), source, loose=False))
        if not notebooks:
            notices.append(f"{given} holds no .ipynb notebooks")
        return notebooks
    if _is_archive(given.name):
        return _from_archive(given, PurePosixPath(), source, extract_to, zip_limits, notices)
    # Any other file is taken as given: grading says so if it is not a notebook.
    return [_Notebook(given, PurePosixPath(given.name), str(given), source, loose=True)]


def _is_notebook(name: str) -> bool:
    """Whether a file name is a notebook's."""
    return name.lower().endswith(NOTEBOOK_SUFFIX)


def _is_archive(name: str) -> bool:
    """Whether a file name is a zip archive's."""
    return name.lower().endswith(ARCHIVE_SUFFIX)


def _is_skipped(name: str) -> bool:
    """Whether a folder or file of this name is never searched (hidden, caches, version control)."""
    return name.startswith(".") or name in SKIPPED_FOLDERS


def _walk(root: Path, notices: list[str], exclude: Path | None = None) -> list[Path]:
    """Notebooks and zips under ``root``, sorted; links that lead out of ``root`` are skipped with a notice.

    ``exclude`` is a folder never searched (where zips are extracted, should it lie under ``root``).
    """
    boundary = root.resolve()
    excluded = exclude.resolve() if exclude is not None else None
    reached: list[tuple[Path, Path, bool]] = []  # (path, resolved path, reached through a link)

    def visit(folder: Path, ancestors: frozenset[Path], through_link: bool) -> None:
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError as error:
            notices.append(f"{folder} cannot be read ({error.strerror or error}); it was skipped")
            return
        for entry in entries:
            if _is_skipped(entry.name):
                continue
            path = folder / entry.name
            is_link = entry.is_symlink()
            is_dir = entry.is_dir()  # follows links
            if not is_dir and not (_is_notebook(entry.name) or _is_archive(entry.name)):
                continue
            target = path.resolve()
            if is_link and not target.exists():
                notices.append(f"{path} is a broken link; it was skipped")
                continue
            if is_link and not target.is_relative_to(boundary):
                notices.append(f"{path} is a link to {target}, outside {root}; it was skipped")
                continue
            if is_dir:
                # A link back to a folder being searched would loop forever.
                if target not in ancestors and target != excluded:
                    visit(path, ancestors | {target}, through_link or is_link)
            elif entry.is_file():
                reached.append((path, target, through_link or is_link))

    visit(root, frozenset({boundary}), through_link=False)
    # A file reached twice (through a link inside the folder) is graded once, preferably by its
    # own path rather than through the link.
    by_target: dict[Path, list[tuple[Path, bool]]] = {}
    for path, target, linked in reached:
        by_target.setdefault(target, []).append((path, linked))
    kept: list[Path] = []
    for copies in by_target.values():
        keep = next((path for path, linked in copies if not linked), copies[0][0])
        kept.append(keep)
        for path, _ in copies:
            if path != keep:
                notices.append(f"{path} leads to the same file as {keep}, which is graded once, as {keep}")
    return sorted(kept, key=lambda path: path.relative_to(root).parts)


# --- zips --------------------------------------------------------------------------------------


def _from_archive(
    archive: Path,
    prefix: PurePosixPath,
    source: int,
    extract_to: Path | None,
    zip_limits: ZipLimits,
    notices: list[str],
) -> list[_Notebook]:
    """The notebooks of a zip, extracted into a fresh folder of ``extract_to``; ``prefix`` stands for the zip."""
    if extract_to is None:
        raise UsageError(f"{archive} is a zip archive, and no folder to extract zips into was given")
    destination = _extract(archive, extract_to, zip_limits, notices)
    if destination is None:
        return []
    # An archive of one folder (hw1.zip holding hw1/...) is read as that folder's contents.
    entries = list(destination.iterdir())
    root = entries[0] if len(entries) == 1 and entries[0].is_dir() else destination
    notebooks = [
        _Notebook(
            path,
            prefix / path.relative_to(root).as_posix(),
            f"{archive}:{path.relative_to(destination).as_posix()}",
            source,
            loose=False,
        )
        for path in _walk(root, notices)
        if _is_notebook(path.name)
    ]
    if not notebooks:
        notices.append(f"{archive} holds no .ipynb notebooks")
    return notebooks


def _extract(archive: Path, extract_to: Path, limits: ZipLimits, notices: list[str]) -> Path | None:
    """Extract a zip's notebooks and the files beside them into a fresh folder; None if nothing could be."""
    try:
        # Reads the whole central directory: a damaged archive fails here, not half-way.
        zip_file = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, OSError) as error:
        notices.append(f"{archive} is not a readable zip archive ({error}); it was skipped")
        return None
    with zip_file:
        members = zip_file.infolist()
        if len(members) > limits.members:
            notices.append(f"{archive} has {len(members)} entries, more than the {limits.members} allowed; it was not extracted")
            return None
        selected = []
        for info, parts in _select_members(archive, members, notices):
            if info.file_size > limits.member_bytes:
                notices.append(
                    f"{archive}: skipped {info.filename!r}: it declares {_size(info.file_size)} uncompressed, "
                    f"more than the {_size(limits.member_bytes)} allowed per file"
                )
            else:
                selected.append((info, parts))
        declared = sum(info.file_size for info, _ in selected)
        if declared > limits.total_bytes:
            notices.append(
                f"{archive} declares {_size(declared)} uncompressed, more than the {_size(limits.total_bytes)} "
                "allowed per archive; it was not extracted"
            )
            return None
        try:
            extract_to.mkdir(parents=True, exist_ok=True)
            destination = Path(tempfile.mkdtemp(prefix=f"{archive.stem[:40]}-", dir=extract_to))
        except OSError as error:
            raise UsageError(f"cannot extract {archive} into {extract_to}: {error.strerror or error}") from error
        _extract_members(archive, zip_file, selected, destination, limits, notices)
        return destination


def _select_members(
    archive: Path, members: list[zipfile.ZipInfo], notices: list[str]
) -> list[tuple[zipfile.ZipInfo, tuple[str, ...]]]:
    """The safe members worth extracting (notebooks and the files in their folders), with their path parts."""
    candidates: list[tuple[zipfile.ZipInfo, tuple[str, ...]]] = []
    notebook_folders: set[tuple[str, ...]] = set()
    for info in members:
        problem = _member_problem(info)
        if problem is not None:
            notices.append(f"{archive}: skipped {info.filename!r}: {problem}")
            continue
        parts = tuple(part for part in info.filename.replace("\\", "/").split("/") if part not in ("", "."))
        if info.is_dir() or not parts or any(_is_skipped(part) for part in parts):
            continue
        if _is_archive(parts[-1]):
            notices.append(
                f"{archive}: skipped {info.filename!r}: zips inside zips are not opened (extract it and grade its folder)"
            )
            continue
        if _is_notebook(parts[-1]):
            notebook_folders.add(parts[:-1])
        candidates.append((info, parts))
    selected = []
    left_out = 0
    for info, parts in candidates:
        folder = parts[:-1]
        if any(folder[:depth] in notebook_folders for depth in range(len(folder) + 1)):
            selected.append((info, parts))
        else:
            left_out += 1
    if left_out:
        notices.append(f"{archive}: {left_out} file(s) in no notebook's folder were not extracted")
    return selected


def _member_problem(info: zipfile.ZipInfo) -> str | None:
    """Why a zip member must not be extracted, or None when it is safe."""
    name = info.filename.replace("\\", "/")
    kind = stat.S_IFMT(info.external_attr >> 16)
    if kind == stat.S_IFLNK:
        return "it is a symbolic link (links are never extracted)"
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        return "it is not a regular file"
    if name.startswith("/") or re.match(r"[A-Za-z]:", name):
        return "its path is absolute (it would be written outside the extraction folder)"
    if ".." in name.split("/"):
        return "its path contains '..' (it would be written outside the extraction folder)"
    if info.flag_bits & 0x1:
        return "it is encrypted"
    return None


def _extract_members(
    archive: Path,
    zip_file: zipfile.ZipFile,
    selected: list[tuple[zipfile.ZipInfo, tuple[str, ...]]],
    destination: Path,
    limits: ZipLimits,
    notices: list[str],
) -> None:
    """Stream the selected members into ``destination``, counting the bytes really written."""
    boundary = destination.resolve()
    written_total = 0
    for info, parts in selected:
        target = destination.joinpath(*parts)
        # The parts were checked, and only folders and files are created here; check anyway.
        if not target.parent.resolve().is_relative_to(boundary):
            notices.append(f"{archive}: skipped {info.filename!r}: it would be written outside the extraction folder")
            continue
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            sink = target.open("xb")
        except FileExistsError:
            notices.append(f"{archive}: skipped {info.filename!r}: a file of that name was already extracted")
            continue
        except OSError as error:
            notices.append(f"{archive}: skipped {info.filename!r}: it cannot be written ({error.strerror or error})")
            continue
        cap = min(limits.member_bytes, limits.total_bytes - written_total)
        try:
            with sink, zip_file.open(info) as stream:
                written_total += _copy_capped(stream, sink, cap)
        except _ArchiveOverflow as overflow:
            target.unlink(missing_ok=True)
            scope = "per file" if overflow.limit == limits.member_bytes else "for the whole archive"
            notices.append(
                f"{archive}: {info.filename!r} inflates past the {_size(overflow.limit)} allowed {scope} "
                "(a zip bomb?); extraction stopped there"
            )
            return
        except _MEMBER_READ_ERRORS as error:
            target.unlink(missing_ok=True)
            notices.append(f"{archive}: skipped {info.filename!r}: it is corrupt ({error})")


def _copy_capped(source: IO[bytes], sink: IO[bytes], limit: int) -> int:
    """Copy in chunks and return the byte count; raise :class:`_ArchiveOverflow` past ``limit`` bytes."""
    # zipfile stops at a member's declared size, but the cap is this module's promise: count
    # the bytes really written rather than trust the header.
    written = 0
    while chunk := source.read(COPY_CHUNK_BYTES):
        written += len(chunk)
        if written > limit:
            raise _ArchiveOverflow(limit)
        sink.write(chunk)
    return written


def _size(count: int) -> str:
    """A byte count for people."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"


# --- layouts -----------------------------------------------------------------------------------


def _detect_layout(notebooks: list[_Notebook], inputs: list[Path], notices: list[str]) -> str:
    """The layout the files themselves suggest, with a notice when it is not plain paths."""
    if all(CANVAS_NAME.fullmatch(notebook.relative.name) for notebook in notebooks):
        notices.append(
            f"layout: canvas (auto-detected: all {len(notebooks)} notebook names follow Canvas's "
            "lastfirst_userid_submissionid_name pattern)"
        )
        return "canvas"
    evidence = _per_student_evidence(notebooks, inputs)
    if evidence is not None:
        notices.append(f"layout: per-student (auto-detected: {evidence}; each subfolder is one student)")
        return "per-student"
    return "paths"


def _per_student_evidence(notebooks: list[_Notebook], inputs: list[Path]) -> str | None:
    """Why the inputs look like one folder per student, or None when they do not.

    Each input must be a folder (or zip) holding no notebook directly, and more than half of its
    subfolders that hold notebooks must hold exactly one. At least two students are needed: one
    folder of one notebook says nothing about the layout.
    """
    if any(notebook.loose or len(notebook.relative.parts) == 1 for notebook in notebooks):
        return None
    reasons = []
    students = 0
    for source, given in enumerate(inputs):
        counts = Counter(notebook.relative.parts[0] for notebook in notebooks if notebook.source == source)
        if not counts:
            continue
        single = sum(1 for count in counts.values() if count == 1)
        if 2 * single <= len(counts):
            return None
        students += len(counts)
        reasons.append(f"{single} of the {len(counts)} subfolders of {given} with notebooks hold exactly one")
    return "; ".join(reasons) if students >= 2 else None


def _name(notebook: _Notebook, layout: str, notices: list[str]) -> _Named:
    """What ``layout`` makes of a notebook's path: its id before de-duplication and its student."""
    path_id = notebook.relative.with_suffix("").as_posix()
    if layout == "canvas":
        match = CANVAS_NAME.fullmatch(notebook.relative.name)
        if match is not None:
            student = match["student"]
            return _Named(
                base_id=f"{match['name']}_{student}",
                group=("student", student),
                student=student,
                name=match["name"],
                late=match["late"] is not None,
            )
        notices.append(
            f"{notebook.relative} is not named as Canvas names submissions (lastfirst_userid_submissionid_name); "
            f"it is graded as {path_id!r}, with no student id"
        )
    elif layout == "per-student":
        if not notebook.loose and len(notebook.relative.parts) > 1:
            student = notebook.relative.parts[0]
            return _Named(base_id=student, group=("student", student), student=student)
        notices.append(f"{notebook.relative} is not inside a student's folder; it is graded as {path_id!r}, with no student id")
    return _Named(base_id=path_id, group=("path", path_id))


def _unique_ids(notebooks: list[_Notebook], named: list[_Named], notices: list[str]) -> list[str]:
    """One id per notebook: the first of a group (by path) keeps its plain id, the others get -2, -3…"""
    groups: dict[tuple[str, str], list[int]] = {}
    for index, naming in enumerate(named):
        groups.setdefault(naming.group, []).append(index)
    for members in groups.values():
        members.sort(key=lambda index: (notebooks[index].relative.parts, notebooks[index].source))
    ids: dict[int, str] = {}
    taken: set[str] = set()
    # Plain ids first, so that one student's "-2" never takes another student's plain id.
    for members in groups.values():
        first = members[0]
        if named[first].base_id not in taken:
            ids[first] = named[first].base_id
            taken.add(named[first].base_id)
    for members in groups.values():
        for index in members:
            if index not in ids:
                ids[index] = _next_free(named[index].base_id, taken)
        if len(members) > 1:
            duplicates = [notebooks[index] for index in members]
            notices.append(_duplicate_notice(duplicates, named[members[0]], [ids[index] for index in members]))
    return [ids[index] for index in range(len(notebooks))]


def _next_free(base_id: str, taken: set[str]) -> str:
    """``base_id`` with the first free -2, -3… suffix, now taken."""
    count = 2
    while f"{base_id}-{count}" in taken:
        count += 1
    taken.add(f"{base_id}-{count}")
    return f"{base_id}-{count}"


def _duplicate_notice(notebooks: list[_Notebook], naming: _Named, ids: list[str]) -> str:
    """The sentence saying that several notebooks share a student (or an id), and how each is filed."""
    filed = ", ".join(ids[:-1]) + " and " + ids[-1]
    if naming.student is None:
        origins = ", ".join(notebook.origin for notebook in notebooks)
        return f"{len(notebooks)} notebooks would share the id {naming.base_id!r} ({origins}); they are graded as {filed}"
    files = ", ".join(notebook.relative.as_posix() for notebook in notebooks)
    who = f"student {naming.student}" + (f" ({naming.name})" if naming.name else "")
    return f"{who} has {len(notebooks)} notebooks: {files}; all are graded, as {filed}"
