"""Writing output files (``distviz.trace.write_atomic``, used by ``Trace.save`` and every CLI
output): only regular files are replaced; ``/dev/null``, FIFOs and ``-`` are written into; a
symbolic link keeps being a link; a folder is refused.

The ``/dev/null`` tests run in a private mount namespace (``unshare -m``) with a scratch
``/dev`` on tmpfs, so a regression replaces that scratch node, never the machine's
``/dev/null``. They need root (as here and in CI); elsewhere they are skipped.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import replay_fixtures as F
from builders.write_atomic import _in_private_dev
from conftest import ROOT
from guards import HANG_GUARD_S
from typer.testing import CliRunner

from distviz.cli import app
from distviz.errors import OutputError
from distviz.files import is_stream, write_atomic
from distviz.tracing.shared.journal import write_trace

FORMATS = ("svg", "png", "dot", "html", "perfetto")


def _trace(tmp_path: Path) -> Path:
    path = tmp_path / "dn.trace.json"
    F.design_note().save(path)
    return path


def _distviz(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "distviz", *args], capture_output=True,
                          cwd=cwd, timeout=HANG_GUARD_S, env={**os.environ, "PYTHONPATH": str(ROOT)})


def _scratch_null(tmp_path: Path) -> Path:
    """A character device with /dev/null's numbers, in the test's own folder (needs root)."""
    if os.geteuid() != 0:
        pytest.skip("making a character device (mknod) needs root")
    dev = tmp_path / "null"
    os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return dev


def _reader(fifo: Path) -> tuple[threading.Thread, list[bytes]]:
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as fh:
            got.append(fh.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread, got


# -- regular files and missing paths: replaced atomically ------------------------------------

def test_missing_path_is_created_with_its_folders(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "out.json"
    write_atomic(target, "text")
    assert target.read_text() == "text"
    assert stat.S_ISREG(target.stat().st_mode)


def test_regular_file_is_replaced_not_rewritten_in_place(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old")
    target.chmod(0o640)
    before = target.stat().st_ino
    write_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    assert target.stat().st_ino != before, "a regular file is replaced (rename), not rewritten"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"], "no temporary file left"


def test_a_new_file_gets_the_umask_and_the_umask_is_never_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A traced program's writer thread writes traces while the program's own threads create
    files: setting the process's umask to read it (even for an instant) would give their files
    the wrong mode. The new file's mode is what ``open`` gives under the umask."""
    set_to: list[int] = []
    real_umask = os.umask

    def umask(mask: int) -> int:
        set_to.append(mask)
        return real_umask(mask)
    old = real_umask(0o027)
    try:
        monkeypatch.setattr(os, "umask", umask)
        write_atomic(tmp_path / "new.json", "text", sync=False)
        write_trace(tmp_path / "t.trace.json", "{}")
    finally:
        real_umask(old)
    assert set_to == [], f"the umask was set while writing: {set_to}"
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "t.trace.json").stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.json", "t.trace.json"]


# -- symbolic links: the target is written, the link stays -----------------------------------

def test_symlink_to_a_regular_file_stays_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_atomic(link, "new")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "real.json"]


def test_dangling_symlink_creates_its_target(tmp_path: Path) -> None:
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "sub" / "real.json")
    write_atomic(link, "new")
    assert link.is_symlink()
    assert (tmp_path / "sub" / "real.json").read_text() == "new"


def test_symlink_chain_writes_the_final_target(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("old")
    (tmp_path / "one").symlink_to(real)
    (tmp_path / "two").symlink_to(tmp_path / "one")
    write_atomic(tmp_path / "two", "new")
    assert (tmp_path / "two").is_symlink() and (tmp_path / "one").is_symlink()
    assert real.read_text() == "new"


# -- devices, FIFOs and standard output: written into, never replaced ------------------------

def test_character_device_is_written_into_not_replaced(tmp_path: Path) -> None:
    dev = _scratch_null(tmp_path)
    assert is_stream(dev)
    write_atomic(dev, "x" * 100)
    F.design_note().save(dev)
    assert stat.S_ISCHR(dev.stat().st_mode)
    assert dev.stat().st_rdev == os.makedev(1, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]


def test_a_traced_programs_trace_into_a_device_keeps_the_device(tmp_path: Path) -> None:
    """``distviz.backward(..., path=os.devnull)`` writes through ``journal.write_trace``, which
    once replaced the device with a regular file (the machine's ``/dev/null``, as root)."""
    dev = _scratch_null(tmp_path)
    write_trace(dev, F.design_note().dumps())
    assert stat.S_ISCHR(dev.stat().st_mode) and dev.stat().st_rdev == os.makedev(1, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]


def test_symlink_to_a_character_device_is_written_into(tmp_path: Path) -> None:
    dev = _scratch_null(tmp_path)
    link = tmp_path / "out.json"
    link.symlink_to(dev)
    write_atomic(link, "data")
    assert link.is_symlink() and stat.S_ISCHR(dev.stat().st_mode)


def test_fifo_is_written_into_not_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    thread, got = _reader(fifo)
    F.design_note().save(fifo)
    thread.join(10)
    assert got == [F.design_note().dumps().encode()]
    assert stat.S_ISFIFO(fifo.stat().st_mode)


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_into_a_fifo_keeps_the_fifo(tmp_path: Path, fmt: str) -> None:
    if fmt in ("svg", "png") and not shutil.which("dot"):
        pytest.skip("needs Graphviz dot")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    thread, got = _reader(fifo)
    result = CliRunner().invoke(app, ["export", str(_trace(tmp_path)), "-f", fmt, "-o",
                                      str(fifo)])
    thread.join(30)
    assert result.exit_code == 0, result.output
    assert got and len(got[0]) > 100
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_dash_writes_the_trace_to_stdout() -> None:
    code = ("import sys; sys.path.insert(0, 'tests'); import replay_fixtures as F; "
            "F.design_note().save('-')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=ROOT,
                         timeout=HANG_GUARD_S, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert out.stdout == F.design_note().dumps().encode()
    assert not (ROOT / "-").exists()


@pytest.mark.parametrize("fmt", ("dot", "perfetto", "html"))
def test_export_dash_writes_only_the_data_to_stdout(tmp_path: Path, fmt: str) -> None:
    trace = _trace(tmp_path)
    to_file = tmp_path / f"out.{fmt}"
    assert _distviz("export", str(trace), "-f", fmt, "-o", str(to_file)).returncode == 0
    out = _distviz("export", str(trace), "-f", fmt, "-o", "-", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == to_file.read_bytes()
    assert b"standard output" in out.stderr
    assert not (tmp_path / "-").exists()


# -- folders and other files: refused --------------------------------------------------------

def test_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "keep").write_text("kept")
    with pytest.raises(OutputError, match="is a folder") as info:
        write_atomic(tmp_path, "data")
    assert info.value.exit_code == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep"]


def test_symlink_to_a_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "dir")
    with pytest.raises(OutputError, match="is a folder"):
        F.design_note().save(tmp_path / "link")
    assert (tmp_path / "link").is_symlink() and not any((tmp_path / "dir").iterdir())


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_to_a_folder_is_a_one_line_error(tmp_path: Path, fmt: str) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    result = CliRunner().invoke(app, ["export", str(_trace(tmp_path)), "-f", fmt, "-o",
                                      str(out_dir)])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: {out_dir}: is a folder; give the name of a file " \
                                    "to write (or - for standard output)"
    assert out_dir.is_dir() and not any(out_dir.iterdir())


def test_frames_into_a_file_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_text("kept")
    result = CliRunner().invoke(app, ["export", str(_trace(tmp_path)), "-f", "dot",
                                      "--frames", str(plain)])
    assert result.exit_code == 2 and "not a folder" in result.output
    assert plain.read_text() == "kept"


def test_frames_keep_a_symlinked_frame_a_link(tmp_path: Path) -> None:
    frames = tmp_path / "frames"
    frames.mkdir()
    real = tmp_path / "first.dot"
    real.write_text("old")
    (frames / "step-00000.dot").symlink_to(real)
    result = CliRunner().invoke(app, ["export", str(_trace(tmp_path)), "-f", "dot",
                                      "--frames", str(frames)])
    assert result.exit_code == 0, result.output
    assert (frames / "step-00000.dot").is_symlink()
    assert real.read_text().startswith("digraph")


def test_two_outputs_to_stdout_are_refused(tmp_path: Path) -> None:
    scenario = ROOT / "scenarios" / "design_note.yaml"
    result = CliRunner().invoke(app, ["run", str(scenario), "-o", "-", "--svg", "-"])
    assert result.exit_code == 2
    assert "-o and --svg all write to standard output" in result.output
    result = CliRunner().invoke(app, ["run", str(scenario), "--perfetto", "-", "--json"])
    assert result.exit_code == 2 and "cannot be used with --json" in result.output


# -- the real /dev/null, in a private mount namespace ----------------------------------------


def test_export_to_dev_null_keeps_dev_null(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    exports = "\n".join(f"{sys.executable} -m distviz export {trace} -f {fmt} -o /dev/null"
                        for fmt in FORMATS if fmt not in ("svg", "png") or shutil.which("dot"))
    save = (f"{sys.executable} -c \"from distviz.trace import load; "
            f"load('{trace}').save('/dev/null')\"")
    # a traced program's own trace (``distviz.backward(..., path=os.devnull)``)
    save += (f"\n{sys.executable} -c \"from pathlib import Path; "
             "from distviz.tracing.shared.journal import write_trace; "
             f"write_trace(Path('/dev/null'), open('{trace}').read())\"")
    out = _in_private_dev(f"{exports}\n{save}\nstat -c '%F %t:%T' /dev/null\nls -A /dev\n")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "character special file 1:3" in lines, out.stdout
    assert not [ln for ln in lines if ln.startswith(("null.", ".null"))], out.stdout
