"""The README's set-up commands in a fresh ``git clone``, run from its root as a new user would:
``python3 -m venv .venv && . .venv/bin/activate``, ``pip install . && kafkalite demo``.

Every process must run the compiled record path: the demo's driver, Spark's Python workers (which
start in the clone, so they import its ``spark_kafkalite/`` before the installed copy), and a
script run from the clone (``python -m`` from its root, as ``pytest`` and user scripts import it).
``KAFKALITE_REQUIRE_NATIVE=1`` makes any fallback to the pure-Python twins an ImportError in all of
them (spark_kafkalite/protocol/native.py), and the output is checked for the fallback warning and
for pyspark's pandas FutureWarning. The demo's answer is checked against pandas' computation from
the CSV. The clone is of the committed HEAD (uncommitted edits are not in it).

To stay fast and offline, the venv sees this environment's installed dependencies (a ``.pth`` to a
directory of links to them, without this project's own files); ``pip install .`` itself, with its
isolated build, is the README's. The Cython compile is not repeated when this checkout already
built a committed ``.pyx`` unchanged (``.ci/run``'s ``pip install`` compiled them from the same
commit): its generated C and built extension are copied into the clone first, where the install
finds them up to date, as a second ``pip install .`` in one checkout does; any other ``.pyx`` is
compiled in the clone.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from spark_kafkalite.demo import flights_csv_zip

ROOT = Path(__file__).resolve().parents[2]
VENV_COMMAND = "python3 -m venv .venv && . .venv/bin/activate"
INSTALL_AND_DEMO = "pip install . && kafkalite demo"
FALLBACK_TEXT = "using the pure-Python fallback"


def _run(command: str, cwd: Path, env: dict[str, str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """``bash -c command`` in its own process group, killed whole on timeout (the demo's JVM)."""
    proc = subprocess.Popen(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{command!r} did not finish in {timeout_s:.0f} s\n{out[-3000:]}\n{err[-3000:]}")
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def _dependency_links(target: Path) -> Path:
    """``target`` filled with links to every entry of this environment's site-packages except this
    project's own files (its package, the editable-install hooks, its metadata) and ``.pth`` files."""
    own: set[str] = set()
    try:
        dist = importlib.metadata.distribution("spark-kafkalite")
        own = {Path(str(f)).parts[0] for f in dist.files or ()}
    except importlib.metadata.PackageNotFoundError:
        pass
    target.mkdir()
    for site_dir in dict.fromkeys(Path(sysconfig.get_paths()[k]) for k in ("purelib", "platlib")):
        for entry in site_dir.iterdir():
            if entry.name in own or entry.suffix == ".pth" or (target / entry.name).exists():
                continue
            (target / entry.name).symlink_to(entry)
    return target


def _seed_build_outputs(clone: Path) -> None:
    """For each ``.pyx`` of the clone that this checkout holds unchanged and built since its last
    change (``pip install .`` or ``build_ext`` here: the generated ``.c`` beside it, the extension
    under ``build/lib.*``): copies both to the same places in the clone, dated a day ahead, so
    that its build skips Cython and the C compiler for them. Cython regenerates a ``.c`` older than
    any file it depends on, and those include Cython's own ``.pxd`` files (``libc``,
    ``cpython``), which the isolated build installs moments before it runs; setuptools'
    ``build_ext`` then recompiles an extension older than its ``.c``."""
    ahead = time.time() + 86_400
    for pyx in sorted(clone.glob("spark_kafkalite/**/_*.pyx")):
        rel = pyx.relative_to(clone)
        source, c_file = ROOT / rel, (ROOT / rel).with_suffix(".c")
        built = sorted((ROOT / "build").glob(f"lib.*/{rel.parent}/{rel.stem}.*.so"))
        if not (source.exists() and c_file.exists() and len(built) == 1):
            continue
        if source.read_bytes() != pyx.read_bytes():
            continue
        if min(c_file.stat().st_mtime, built[0].stat().st_mtime) <= source.stat().st_mtime:
            continue
        target = clone / built[0].relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        for copy_from, copy_to in ((c_file, pyx.with_suffix(".c")), (built[0], target)):
            shutil.copyfile(copy_from, copy_to)
            os.utime(copy_to, (ahead, ahead))


def _expected_from_csv() -> dict[str, dict[str, Any]]:
    with zipfile.ZipFile(flights_csv_zip()) as archive, archive.open("flights.csv") as handle:
        flights = pd.read_csv(handle)
    grouped = flights.assign(delayed=(flights["dep_delay"] > 15).astype("int64")).groupby("carrier")
    frame = pd.DataFrame(
        {
            "flights": grouped.size(),
            "departed": grouped["dep_delay"].count(),
            "avg_dep_delay": grouped["dep_delay"].mean(),
            "max_dep_delay": grouped["dep_delay"].max(),
            "delayed_15": grouped["delayed"].sum(),
            "days": flights.groupby("carrier")[["year", "month", "day"]].apply(
                lambda d: len(d.drop_duplicates())
            ),
        }
    )
    return {str(carrier): row.to_dict() for carrier, row in frame.iterrows()}


def _carrier_rows(stdout: str) -> list[list[str]]:
    """The demo table's body rows: [#, carrier, airline, flights, cancelled, avg, % > 15, max, days]."""
    rows = []
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if len(cells) == 9 and cells[0].isdigit():
            rows.append(cells)
    return rows


@pytest.mark.timeout(1200)
def test_readme_install_and_demo_in_a_fresh_clone_run_native_everywhere(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert VENV_COMMAND in readme and INSTALL_AND_DEMO in readme, "the README's set-up commands changed"
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout to clone")

    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "VIRTUAL_ENV"))}
    env.pop("PYTHONPATH", None)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["KAFKALITE_REQUIRE_NATIVE"] = "1"

    venv = _run(VENV_COMMAND, clone, env, 120)
    assert venv.returncode == 0, venv.stderr
    (site_packages,) = (clone / ".venv" / "lib").glob("python3*/site-packages")
    deps = _dependency_links(tmp_path / "deps")
    (site_packages / "_test_dependencies.pth").write_text(f"{deps}\n", encoding="utf-8")

    _seed_build_outputs(clone)
    run = _run(f"{VENV_COMMAND} && {INSTALL_AND_DEMO}", clone, env, 1080)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-6000:]
    assert "Successfully installed spark-kafkalite" in run.stdout
    assert FALLBACK_TEXT not in output and "is not available" not in output, output[-6000:]
    assert "FutureWarning" not in output, output[-6000:]
    assert "Matches a direct pyarrow computation from the CSV: yes" in run.stdout

    # The demo's numbers against pandas' own computation from the CSV.
    text = " ".join(run.stdout.split())
    summary = re.search(
        r"([\d,]+) flights loaded; (\d+) micro-batches; ([\d,]+) \(carrier, day\) windows written "
        r"\((\d+) duplicates\); (\d+) rows dropped by the watermark",
        text,
    )
    assert summary, run.stdout[-3000:]
    loaded, batches, windows, duplicates, dropped = (int(g.replace(",", "")) for g in summary.groups())
    expected = _expected_from_csv()
    assert (loaded, duplicates, dropped) == (336_776, 0, 0)
    assert batches >= 7  # 336,776 rows at 50,000 per trigger
    assert windows == sum(int(e["days"]) for e in expected.values())
    rows = _carrier_rows(run.stdout)
    assert sorted(r[1] for r in rows) == sorted(expected)
    averages = [float(r[5]) for r in rows]
    assert averages == sorted(averages, reverse=True)
    for _, carrier, _, flights, cancelled, avg, pct_15, max_delay, days in rows:
        exp = expected[carrier]
        assert int(flights.replace(",", "")) == exp["flights"], carrier
        assert int(cancelled.replace(",", "")) == exp["flights"] - exp["departed"], carrier
        assert avg == f"{exp['avg_dep_delay']:.2f}", carrier
        assert pct_15 == f"{100 * exp['delayed_15'] / exp['departed']:.1f}", carrier
        assert int(max_delay) == exp["max_dep_delay"] and int(days) == exp["days"], carrier

    # A script run from the clone's root (and pytest, pythonpath = ["."]) imports the checkout:
    # the install left the compiled modules there too.
    check = _run(
        f"{VENV_COMMAND} && python -m spark_kafkalite.native --require && "
        "python -c 'import spark_kafkalite.protocol._record_decode as m; print(m.__file__)'",
        clone,
        env,
        120,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    *status, module_file = check.stdout.splitlines()
    assert len(status) >= 5 and all(line.endswith(": native") for line in status), check.stdout
    assert Path(module_file).is_relative_to(clone / "spark_kafkalite"), check.stdout
