"""FolderSink: atomic, idempotent per span, never overwriting another run, never escaping."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from otel_diary import FolderSink, StubReflector, render
from otel_diary.errors import FolderUnwritable, UnsafePathError
from otel_diary.sinks.folder import relative_location
from tests.pipeline.test_render import COMPLETED
from tests.support.fifo import finishes, needs_fifos


def write(root: Path, **changes: object) -> Path:
    run = replace(COMPLETED, **changes)  # type: ignore[arg-type]
    return Path(FolderSink(root).write(render(run, StubReflector().reflect(run))))


def test_same_span_same_file(tmp_path: Path) -> None:
    """Delivering the same task span twice leaves one file."""
    first = write(tmp_path)
    second = write(tmp_path)
    assert first == second
    assert len(list(tmp_path.rglob("*.md"))) == 1
    assert not list(tmp_path.rglob("*.tmp"))


def test_one_sink_names_a_file_alike_before_and_after_knowing_its_folder(
        tmp_path: Path) -> None:
    """The first diary of an agent folder is located by resolving its path, the next ones
    from the folder the sink remembers: the same location strings either way."""
    sink = FolderSink(tmp_path / "kb")
    diaries = [render(replace(COMPLETED, span_id=span_id), "x") for span_id in (0x1, 0x2)]
    locations = [sink.write(diary) for diary in (*diaries, diaries[0])]
    expected = [str((tmp_path / "kb" / path).resolve())
                for path in (diaries[0].path, diaries[1].alternate_path, diaries[0].path)]
    assert locations == expected
    assert [str(sink.target(diary)) for diary in diaries] == expected[:2]


def test_other_run_of_same_task_does_not_overwrite(tmp_path: Path) -> None:
    """Another run of the same task on the same day gets its own file; both survive."""
    first = write(tmp_path)
    second = write(tmp_path, span_id=0x1111)
    third = write(tmp_path, span_id=0x2222)
    again = write(tmp_path, span_id=0x1111)
    assert len({first, second, third}) == 3 and again == second
    assert len(list(tmp_path.rglob("*.md"))) == 3
    assert "id: " + render(COMPLETED, "x").id in first.read_text()


def test_symlinked_agent_folder_cannot_escape(tmp_path: Path) -> None:
    """A symlink planted as an agent folder pointing outside the root is refused."""
    outside = tmp_path / "outside"
    outside.mkdir()
    agents = tmp_path / "kb" / "diaries" / "agents"
    agents.mkdir(parents=True)
    (agents / "coder").symlink_to(outside)
    with pytest.raises(UnsafePathError):
        write(tmp_path / "kb")
    assert not any(outside.iterdir())


def test_a_diary_folder_linked_out_of_the_knowledge_base_is_refused(tmp_path: Path) -> None:
    """With ``diaries/agents`` a link to a folder outside ``diaries``, nothing is written
    there: readers and reindex would not read it (what leads out is not the knowledge
    base's). A knowledge base whose root is a link is written as usual."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "kb" / "diaries").mkdir(parents=True)
    (tmp_path / "kb" / "diaries" / "agents").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafePathError, match="leads out"):
        write(tmp_path / "kb")
    assert not any(outside.iterdir())
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    assert write(tmp_path / "link").is_file()


def test_links_planted_after_a_first_write_cannot_escape(tmp_path: Path) -> None:
    """The sink that already wrote into an agent folder still refuses that folder, or a
    diary file in it, once either is replaced by a symlink pointing outside the root."""
    outside = tmp_path / "outside"
    outside.mkdir()
    sink = FolderSink(tmp_path / "kb")
    folder = Path(sink.write(render(COMPLETED, "x"))).parent
    sink.write(render(replace(COMPLETED, span_id=COMPLETED.span_id + 3, task_id="T-2"), "x"))
    other = replace(COMPLETED, span_id=COMPLETED.span_id + 1, task_id="T-other")
    (folder / render(other, "x").path.rpartition("/")[2]).symlink_to(outside / "x.md")
    with pytest.raises(UnsafePathError):
        sink.write(render(other, "x"))
    folder.rename(tmp_path / "moved")
    folder.symlink_to(outside)
    with pytest.raises(UnsafePathError):
        sink.write(render(replace(COMPLETED, span_id=COMPLETED.span_id + 2), "x"))
    assert not any(outside.iterdir())


def test_a_name_taken_meanwhile_is_never_overwritten(tmp_path: Path) -> None:
    """If another process creates the file between the check and the write, this run
    lands in its alternate file instead of replacing the other run's diary."""
    from otel_diary.sinks.base import atomic_write

    first = render(COMPLETED, "x")
    path = tmp_path / first.path
    path.parent.mkdir(parents=True)
    path.write_text("---\nid: kh-someone-else\n---\n")
    with pytest.raises(FileExistsError):
        atomic_write(path, b"mine", replace=False)
    assert path.read_text().startswith("---\nid: kh-someone-else")
    assert Path(FolderSink(tmp_path).write(first)).name.endswith(f"-{first.span_id[:8]}.md")


@needs_fifos
@pytest.mark.parametrize("earlier", [0, 1], ids=["new-folder", "known-folder"])
def test_a_fifo_where_a_diary_goes_never_blocks_the_writer(tmp_path: Path,
                                                            earlier: int) -> None:
    """A FIFO planted at a diary's file name (nothing ever writes into it) is a name taken:
    the sink looks at it without waiting and writes the diary to its alternate file, both
    when it resolves the agent folder and when it remembers it (after a diary written
    into the existing folder)."""
    diary = render(COMPLETED, "x")
    sink = FolderSink(tmp_path)
    primary, alternate = tmp_path / diary.path, tmp_path / diary.alternate_path
    primary.parent.mkdir(parents=True)
    for number in range(earlier):
        sink.write(replace(diary, id=f"kh-earlier-{number}",
                           path=diary.path.replace(".md", f"-{number}.md")))
    os.mkfifo(primary)
    assert Path(finishes(lambda: sink.write(diary), primary)) == alternate.resolve()
    assert alternate.read_text() == diary.content


def test_diary_files_are_readable_by_others(tmp_path: Path) -> None:
    """Diaries are created with the usual umask-based mode, not a private 0600."""
    import os
    import stat

    mask = os.umask(0o022)
    os.umask(mask)
    written = write(tmp_path)
    assert stat.S_IMODE(written.stat().st_mode) == 0o666 & ~mask


def test_an_unwritable_folder_is_one_error_naming_it(tmp_path: Path) -> None:
    """FolderSink.write raises FolderUnwritable naming the root and the reason."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(FolderUnwritable) as raised:
        write(blocker / "kb")
    assert str(raised.value) == (f"otel-diary cannot write diaries under {blocker / 'kb'}: "
                                 "Not a directory")


APP = """
from opentelemetry.sdk.trace import TracerProvider
import otel_diary

provider = TracerProvider(shutdown_on_exit=False)
processor = otel_diary.install(provider, enabled=True)
for n in range(3):
    with provider.get_tracer("app").start_as_current_span(
            "task", attributes={"orchestrator.task.id": f"T-{n}"}):
        pass
provider.shutdown()
print(processor.stats.sink_errors, processor.stats.diaries)
"""


def test_an_unwritable_otel_diary_dir_is_logged_once_in_one_line(tmp_path: Path) -> None:
    """An app whose OTEL_DIARY_DIR cannot be created gets one log line naming the folder
    and why, for three diaries that fail (counted at each try: once more at shutdown),
    then one line at exit saying they are lost, and no traceback."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("OTEL_", "KB_", "MOTHER_AI_"))}
    env["OTEL_DIARY_DIR"] = str(blocker / "kb")
    done = subprocess.run([sys.executable, "-c", APP], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["6", "0"]
    assert done.stderr.splitlines() == [
        f"otel-diary cannot write diaries under {blocker / 'kb'}: Not a directory "
        "(no diary can be written there until that is fixed)",
        "otel-diary stopped with 3 diaries no sink could write (a full disk, a folder made "
        "read-only?): they are lost"]


def test_a_written_location_is_read_back_relative_to_the_folder(tmp_path: Path) -> None:
    """The index and the lessons find a diary's path in the folder from where the sink
    said it wrote it; a location outside the folder, or the folder itself, is not inside."""
    sink = FolderSink(tmp_path)
    location = sink.write(render(COMPLETED, StubReflector().reflect(COMPLETED)))
    root = str(tmp_path.resolve())
    relative = relative_location(root, location)
    assert relative is not None and relative.startswith("diaries/agents/")
    assert (tmp_path / relative).is_file()
    assert relative_location(root + "/", location) == relative
    assert relative_location(root, root) is None
    assert relative_location(root, root + "-other/diaries/x.md") is None
    assert relative_location(root, "https://hub.example/doc/1") is None
