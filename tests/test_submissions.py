"""Finding submissions as LMS exports give them: folders, Canvas downloads, per-student folders, zips.

Filesystem only: nothing here executes a notebook.
"""

from __future__ import annotations

import io
import stat
import zipfile
from pathlib import Path

import nbformat
import pytest

from grader.discover.submissions import ZipLimits, find_submissions
from grader.errors import UsageError

NOTEBOOK_TEXT = nbformat.writes(nbformat.v4.new_notebook())
CANVAS_FILES = [
    "doejane_1234_5678_lab1.ipynb",
    "doejane_1234_5679_lab1-1.ipynb",
    "leeann_7_8_lab1.ipynb",
    "smithjohn_LATE_42_99_my_lab_1-2.ipynb",
]


def write_notebook(path: Path) -> Path:
    """A tiny valid notebook at ``path`` (its content does not matter to discovery)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(), path)
    return path


def write_zip(path: Path, members: dict[str, str | bytes]) -> Path:
    """A zip holding ``members`` (name → content), stored uncompressed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return path


def files_under(folder: Path) -> set[Path]:
    """Every file (or link) under ``folder``."""
    return {path for path in folder.rglob("*") if path.is_file() or path.is_symlink()}


def test_the_sample_submissions_keep_their_path_ids(root: Path) -> None:
    folder = root / "submissions"

    discovery = find_submissions([folder])

    assert discovery.layout == "paths"
    assert discovery.notices == []
    ids = [found.submission_id for found in discovery.found]
    assert {"ptq-bnb/solution", "perplexity/solution", "latency/starter"} <= set(ids)
    assert len(set(ids)) == len(ids) == len(list(folder.rglob("*.ipynb")))
    assert ids == sorted(ids)
    solution = next(found for found in discovery.found if found.submission_id == "ptq-bnb/solution")
    assert solution.path == folder / "ptq-bnb" / "solution.ipynb"
    assert solution.origin == str(folder / "ptq-bnb" / "solution.ipynb")
    assert all(found.student is None and not found.late for found in discovery.found)


def test_a_notebook_given_directly_is_filed_under_its_stem_and_equal_stems_are_told_apart(tmp_path: Path) -> None:
    first = write_notebook(tmp_path / "a" / "lab.ipynb")
    second = write_notebook(tmp_path / "b" / "lab.ipynb")

    discovery = find_submissions([first, second])

    assert discovery.layout == "paths"
    assert [(found.submission_id, found.path) for found in discovery.found] == [("lab", first), ("lab-2", second)]
    assert discovery.notices == [f"2 notebooks would share the id 'lab' ({first}, {second}); they are graded as lab and lab-2"]


def test_a_canvas_download_names_students_marks_late_work_and_grades_every_duplicate(tmp_path: Path) -> None:
    folder = tmp_path / "canvas"
    for name in CANVAS_FILES:
        write_notebook(folder / name)

    discovery = find_submissions([folder])

    assert discovery.layout == "canvas"
    assert [(found.submission_id, found.path.name, found.student, found.name, found.late) for found in discovery.found] == [
        ("doejane_1234", "doejane_1234_5678_lab1.ipynb", "1234", "doejane", False),
        ("doejane_1234-2", "doejane_1234_5679_lab1-1.ipynb", "1234", "doejane", False),
        ("leeann_7", "leeann_7_8_lab1.ipynb", "7", "leeann", False),
        ("smithjohn_42", "smithjohn_LATE_42_99_my_lab_1-2.ipynb", "42", "smithjohn", True),
    ]
    assert any(notice.startswith("layout: canvas (auto-detected") for notice in discovery.notices)
    assert (
        "student 1234 (doejane) has 2 notebooks: doejane_1234_5678_lab1.ipynb, doejane_1234_5679_lab1-1.ipynb; "
        "all are graded, as doejane_1234 and doejane_1234-2"
    ) in discovery.notices


def test_a_zip_of_a_canvas_download_is_extracted_and_gives_the_same_ids_every_run(tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "submissions.zip", {name: NOTEBOOK_TEXT for name in CANVAS_FILES})

    first = find_submissions([archive], extract_to=tmp_path / "extracted")
    second = find_submissions([archive], extract_to=tmp_path / "extracted")

    assert first.layout == "canvas"
    assert [found.submission_id for found in first.found] == ["doejane_1234", "doejane_1234-2", "leeann_7", "smithjohn_42"]
    assert [found.origin for found in first.found] == [f"{archive}:{name}" for name in CANVAS_FILES]
    assert all(found.path.is_relative_to(tmp_path / "extracted") and found.path.is_file() for found in first.found)
    assert [(found.submission_id, found.origin) for found in second.found] == [
        (found.submission_id, found.origin) for found in first.found
    ]
    assert {found.path.parent for found in first.found}.isdisjoint({found.path.parent for found in second.found})


def test_a_canvas_name_that_does_not_fit_turns_auto_detection_to_paths(tmp_path: Path) -> None:
    folder = tmp_path / "canvas"
    for name in [*CANVAS_FILES, "notes.ipynb"]:
        write_notebook(folder / name)

    auto = find_submissions([folder])
    forced = find_submissions([folder], layout="canvas")

    assert auto.layout == "paths"
    assert "doejane_1234_5678_lab1" in [found.submission_id for found in auto.found]
    assert forced.layout == "canvas"
    notes = next(found for found in forced.found if found.path.name == "notes.ipynb")
    assert (notes.submission_id, notes.student) == ("notes", None)
    assert any(notice.startswith("notes.ipynb is not named as Canvas names submissions") for notice in forced.notices)


def test_one_folder_per_student_files_each_notebook_under_its_student(tmp_path: Path) -> None:
    folder = tmp_path / "export"
    for student in ("alice", "bob", "carol"):
        write_notebook(folder / student / "lab.ipynb")
    write_notebook(folder / "carol" / "old" / "lab.ipynb")
    (folder / "dan").mkdir()  # no submission
    write_zip(folder / "erin.zip", {"erin/lab.ipynb": NOTEBOOK_TEXT})  # a student's upload, zipped

    discovery = find_submissions([folder], extract_to=tmp_path / "extracted")

    assert discovery.layout == "per-student"
    assert [(found.submission_id, found.student, found.origin) for found in discovery.found] == [
        ("alice", "alice", str(folder / "alice" / "lab.ipynb")),
        ("bob", "bob", str(folder / "bob" / "lab.ipynb")),
        ("carol", "carol", str(folder / "carol" / "lab.ipynb")),
        ("carol-2", "carol", str(folder / "carol" / "old" / "lab.ipynb")),
        ("erin", "erin", f"{folder / 'erin.zip'}:erin/lab.ipynb"),
    ]
    assert any(notice.startswith("layout: per-student (auto-detected: 3 of the 4 subfolders") for notice in discovery.notices)
    assert "student carol has 2 notebooks: carol/lab.ipynb, carol/old/lab.ipynb; all are graded, as carol and carol-2" in (
        discovery.notices
    )


def test_the_layout_can_be_forced_either_way(tmp_path: Path) -> None:
    folder = tmp_path / "export"
    for student in ("alice", "bob"):
        write_notebook(folder / student / "lab.ipynb")
    write_notebook(tmp_path / "extra.ipynb")

    as_paths = find_submissions([folder], layout="paths")
    as_students = find_submissions([folder, tmp_path / "extra.ipynb"], layout="per-student")

    assert [found.submission_id for found in as_paths.found] == ["alice/lab", "bob/lab"]
    assert as_paths.notices == []
    assert [(found.submission_id, found.student) for found in as_students.found] == [
        ("alice", "alice"),
        ("bob", "bob"),
        ("extra", None),
    ]
    assert "extra.ipynb is not inside a student's folder; it is graded as 'extra', with no student id" in as_students.notices


def test_one_subfolder_of_one_notebook_is_not_taken_for_a_class(tmp_path: Path) -> None:
    write_notebook(tmp_path / "lab1" / "solution.ipynb")

    discovery = find_submissions([tmp_path])

    assert discovery.layout == "paths"
    assert [found.submission_id for found in discovery.found] == ["lab1/solution"]


def test_a_zip_cannot_write_outside_its_folder_or_plant_links(tmp_path: Path) -> None:
    link = zipfile.ZipInfo("lab/link.ipynb")
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    archive = tmp_path / "upload.zip"
    with zipfile.ZipFile(archive, "w") as upload:
        upload.writestr("../../evil.ipynb", NOTEBOOK_TEXT)
        upload.writestr("lab/../../../climb.ipynb", NOTEBOOK_TEXT)
        upload.writestr("..\\windows.ipynb", NOTEBOOK_TEXT)
        upload.writestr(f"{tmp_path}/planted.ipynb", NOTEBOOK_TEXT)
        upload.writestr(link, "../../../outside")
        upload.writestr("lab/lab.ipynb", NOTEBOOK_TEXT)
    extract_to = tmp_path / "extracted"

    discovery = find_submissions([archive], extract_to=extract_to)

    assert [(found.submission_id, found.origin) for found in discovery.found] == [("lab", f"{archive}:lab/lab.ipynb")]
    assert files_under(tmp_path) - files_under(extract_to) == {archive}
    assert not any(path.is_symlink() for path in extract_to.rglob("*"))
    outside = "(it would be written outside the extraction folder)"
    assert f"{archive}: skipped '../../evil.ipynb': its path contains '..' {outside}" in discovery.notices
    assert any(
        notice.startswith(f"{archive}: skipped 'lab/../../../climb.ipynb': its path contains '..'")
        for notice in discovery.notices
    )
    assert any(
        notice.startswith(f"{archive}: skipped '..\\\\windows.ipynb': its path contains '..'") for notice in discovery.notices
    )
    assert any(
        notice.startswith(f"{archive}: skipped '{tmp_path}/planted.ipynb': its path is absolute") for notice in discovery.notices
    )
    assert f"{archive}: skipped 'lab/link.ipynb': it is a symbolic link (links are never extracted)" in discovery.notices


def test_a_zip_gives_its_notebooks_and_the_files_beside_them_but_no_nested_zip(tmp_path: Path) -> None:
    archive = write_zip(
        tmp_path / "lab.zip",
        {
            "lab/lab.ipynb": NOTEBOOK_TEXT,
            "lab/data/train.csv": "a,b\n1,2\n",
            "lab/inner.zip": b"PK",
            "other/readme.txt": "not beside a notebook",
            "__MACOSX/lab/._lab.ipynb": b"resource fork",
            "lab/.ipynb_checkpoints/lab-checkpoint.ipynb": NOTEBOOK_TEXT,
        },
    )

    discovery = find_submissions([archive], extract_to=tmp_path / "extracted")

    [found] = discovery.found
    assert (found.submission_id, found.origin) == ("lab", f"{archive}:lab/lab.ipynb")
    assert (found.path.parent / "data" / "train.csv").read_text() == "a,b\n1,2\n"
    extracted = {path.relative_to(found.path.parent.parent).as_posix() for path in files_under(tmp_path / "extracted")}
    assert extracted == {"lab/lab.ipynb", "lab/data/train.csv"}
    assert f"{archive}: skipped 'lab/inner.zip': zips inside zips are not opened (extract it and grade its folder)" in (
        discovery.notices
    )
    assert f"{archive}: 1 file(s) in no notebook's folder were not extracted" in discovery.notices


def test_a_zip_member_declaring_too_many_bytes_is_not_extracted(tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "bomb.zip", {"lab/lab.ipynb": NOTEBOOK_TEXT, "lab/weights.bin": b"\0" * 5000})

    discovery = find_submissions([archive], extract_to=tmp_path / "extracted", zip_limits=ZipLimits(member_bytes=1000))

    [found] = discovery.found
    assert not (found.path.parent / "weights.bin").exists()
    assert (
        f"{archive}: skipped 'lab/weights.bin': it declares 4.9 KiB uncompressed, more than the 1000 bytes allowed per file"
        in discovery.notices
    )


def test_a_zip_declaring_too_many_bytes_in_all_is_not_extracted(tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "bomb.zip", {"a.ipynb": NOTEBOOK_TEXT, "b.ipynb": NOTEBOOK_TEXT})

    with pytest.raises(UsageError) as raised:
        find_submissions([archive], extract_to=tmp_path / "extracted", zip_limits=ZipLimits(total_bytes=len(NOTEBOOK_TEXT)))

    assert f"{archive} holds no .ipynb notebooks" in str(raised.value)
    assert "allowed per archive; it was not extracted" in str(raised.value)
    assert files_under(tmp_path / "extracted") == set()


def test_a_zip_with_too_many_entries_is_not_extracted(tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "many.zip", {f"{index}.ipynb": NOTEBOOK_TEXT for index in range(3)})
    write_notebook(tmp_path / "folder" / "kept.ipynb")
    (tmp_path / "folder" / "many.zip").write_bytes(archive.read_bytes())

    discovery = find_submissions([tmp_path / "folder"], extract_to=tmp_path / "extracted", zip_limits=ZipLimits(members=2))

    assert [found.submission_id for found in discovery.found] == ["kept"]
    assert f"{tmp_path / 'folder' / 'many.zip'} has 3 entries, more than the 2 allowed; it was not extracted" in discovery.notices


def test_a_zip_member_that_inflates_past_its_declared_size_is_stopped_while_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = write_zip(
        tmp_path / "bomb.zip",
        {"lab/lab.ipynb": NOTEBOOK_TEXT, "lab/small.bin": b"\0" * 10, "lab/later.txt": "never reached"},
    )
    real_open = zipfile.ZipFile.open

    def lying_open(self: zipfile.ZipFile, member: str | zipfile.ZipInfo, *args: object, **kwargs: object) -> object:
        # A forged header: the member claims 10 bytes but streams far more.
        if getattr(member, "filename", member) == "lab/small.bin":
            return io.BytesIO(b"\0" * 50_000)
        return real_open(self, member, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(zipfile.ZipFile, "open", lying_open)

    discovery = find_submissions([archive], extract_to=tmp_path / "extracted", zip_limits=ZipLimits(member_bytes=1000))

    [found] = discovery.found
    assert sorted(path.name for path in found.path.parent.iterdir()) == ["lab.ipynb"]
    assert (
        f"{archive}: 'lab/small.bin' inflates past the 1000 bytes allowed per file (a zip bomb?); extraction stopped there"
        in discovery.notices
    )


def test_a_corrupt_zip_is_a_notice_not_a_crash(tmp_path: Path) -> None:
    folder = tmp_path / "class"
    write_notebook(folder / "kept.ipynb")
    (folder / "broken.zip").write_bytes(b"PK\x03\x04 this is not really a zip")
    damaged = write_zip(folder / "damaged.zip", {"good.ipynb": NOTEBOOK_TEXT, "bad.ipynb": NOTEBOOK_TEXT + "original"})
    # Change the second member's data after its CRC was recorded.
    damaged.write_bytes(damaged.read_bytes().replace(b"original", b"tampered"))

    discovery = find_submissions([folder], extract_to=tmp_path / "extracted")

    assert [found.submission_id for found in discovery.found] == ["damaged/good", "kept"]
    assert any(notice.startswith(f"{folder / 'broken.zip'} is not a readable zip archive") for notice in discovery.notices)
    assert any(notice.startswith(f"{folder / 'damaged.zip'}: skipped 'bad.ipynb': it is corrupt") for notice in discovery.notices)
    assert not any(path.name == "bad.ipynb" for path in files_under(tmp_path / "extracted"))


def test_a_corrupt_zip_alone_is_a_usage_error_that_says_why(tmp_path: Path) -> None:
    archive = tmp_path / "broken.zip"
    archive.write_bytes(b"not a zip at all")

    with pytest.raises(
        UsageError, match=r"broken\.zip holds no \.ipynb notebooks[^\n]*:\n  - .*broken\.zip is not a readable zip"
    ):
        find_submissions([archive], extract_to=tmp_path / "extracted")


def test_links_that_leave_the_folder_are_skipped(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write_notebook(outside / "secret.ipynb")
    write_notebook(outside / "more" / "other.ipynb")
    folder = tmp_path / "class"
    kept = write_notebook(folder / "alice.ipynb")
    (folder / "stolen.ipynb").symlink_to(outside / "secret.ipynb")
    (folder / "more").symlink_to(outside / "more", target_is_directory=True)
    (folder / "again.ipynb").symlink_to(kept)  # inside: graded once, as itself
    (folder / "loop").symlink_to(folder, target_is_directory=True)
    (folder / "dangling.ipynb").symlink_to(tmp_path / "missing.ipynb")

    discovery = find_submissions([folder])

    assert [(found.submission_id, found.path) for found in discovery.found] == [("alice", kept)]
    notices = "\n".join(discovery.notices)
    assert (
        f"{folder / 'stolen.ipynb'} is a link to {(outside / 'secret.ipynb').resolve()}, outside {folder}; it was skipped"
        in notices
    )
    assert f"{folder / 'more'} is a link to {(outside / 'more').resolve()}, outside {folder}; it was skipped" in notices
    assert f"{folder / 'again.ipynb'} leads to the same file as {kept}, which is graded once, as {kept}" in notices
    assert f"{folder / 'dangling.ipynb'} is a broken link; it was skipped" in notices


def test_a_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"nowhere\.ipynb does not exist"):
        find_submissions([tmp_path / "nowhere.ipynb"])


def test_a_folder_without_notebooks_is_a_usage_error(tmp_path: Path) -> None:
    write_notebook(tmp_path / "empty" / ".ipynb_checkpoints" / "lab-checkpoint.ipynb")
    write_notebook(tmp_path / "empty" / ".hidden" / "lab.ipynb")
    (tmp_path / "empty" / "notes.txt").write_text("no notebooks here")

    with pytest.raises(UsageError, match=r"empty holds no \.ipynb notebooks \(give a notebook, a folder of notebooks or a zip"):
        find_submissions([tmp_path / "empty"])


def test_a_zip_needs_a_folder_to_be_extracted_into(tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "lab.zip", {"lab.ipynb": NOTEBOOK_TEXT})

    with pytest.raises(UsageError, match=r"lab\.zip is a zip archive, and no folder to extract zips into was given"):
        find_submissions([archive])


def test_an_unknown_layout_is_a_usage_error(tmp_path: Path) -> None:
    notebook = write_notebook(tmp_path / "lab.ipynb")

    with pytest.raises(UsageError, match=r"unknown layout 'moodle'; expected one of auto, paths, per-student, canvas"):
        find_submissions([notebook], layout="moodle")


def test_zips_extracted_inside_the_graded_folder_are_not_found_again(tmp_path: Path) -> None:
    folder = tmp_path / "class"
    write_zip(folder / "lab.zip", {"lab.ipynb": NOTEBOOK_TEXT})

    first = find_submissions([folder], extract_to=folder / "extracted")
    second = find_submissions([folder], extract_to=folder / "extracted")

    assert [found.submission_id for found in first.found] == [found.submission_id for found in second.found] == ["lab/lab"]
    assert len(files_under(folder / "extracted")) == 2
