"""``make bench``: run every benchmark the installed tiers allow; one table and one JSON file.

Each ``bench/*.py`` runs as a child process, one after another (never two at once), with
``BENCH_JSON_DIR`` set. A benchmark that writes ``$BENCH_JSON_DIR/<name>.json`` with a
``summary`` list of ``[metric, value, unit]`` rows contributes those rows to the combined table;
every benchmark's printed output is kept in the JSON file too. Benchmarks skip themselves when
their tier or service is missing (vLLM, PostgreSQL, Redis) and say so.

The combined file goes to ``var/bench/<UTC time>-<commit>.json`` (``BENCH_OUT`` overrides).
``python bench/compare.py OLD.json NEW.json`` prints two runs' summaries side by side with
NEW ÷ OLD. Every number is measured under whatever load the machine had; compare runs made on
the same machine, and read ratios measured side by side within one run first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
TIMEOUT_S = float(os.environ.get("BENCH_TIMEOUT_S", "1800"))


def benchmarks() -> list[Path]:
    """Every benchmark script but this one, in name order (``BENCH_ONLY=a,b`` picks some)."""
    only = {x for x in os.environ.get("BENCH_ONLY", "").split(",") if x}
    found = sorted(
        p
        for p in HERE.glob("*.py")
        if p.name != Path(__file__).name and not p.name.startswith("_")  # helpers
    )
    return [p for p in found if not only or p.stem in only]


def commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run_one(script: Path, json_dir: Path) -> dict[str, Any]:
    """Run one benchmark; its status, seconds, output and JSON (if it wrote one)."""
    started = time.monotonic()
    env = {**os.environ, "BENCH_JSON_DIR": str(json_dir)}
    print(f"== {script.name}", flush=True)
    try:
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        status = "ok" if done.returncode == 0 else f"exit {done.returncode}"
        output = done.stdout + (done.stderr[-4000:] if done.returncode else "")
    except subprocess.TimeoutExpired as expired:
        status, output = "timeout", str(expired.stdout or "")
    print(output.rstrip(), flush=True)
    result: dict[str, Any] = {
        "status": status,
        "seconds": round(time.monotonic() - started, 1),
        "output": output,
    }
    if "skipped" in output.lower() and status == "ok" and len(output) < 400:
        result["status"] = "skipped"
    data_file = json_dir / f"{script.stem}.json"
    if data_file.exists():
        result["data"] = json.loads(data_file.read_text())
    return result


def summary_rows(runs: dict[str, dict[str, Any]]) -> list[list[Any]]:
    """``[bench, metric, value, unit]`` for every summary row of every benchmark."""
    rows = []
    for name, run in runs.items():
        for metric, value, unit in run.get("data", {}).get("summary", []):
            rows.append([name, metric, value, unit])
    return rows


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def print_table(runs: dict[str, dict[str, Any]]) -> None:
    print("\nmake bench: combined summary (measured under load; ratios side by side)")
    print(f"{'bench':<12} {'status':<8} {'s':>5}")
    for name, run in runs.items():
        print(f"{name:<12} {run['status']:<8} {run['seconds']:>5.0f}")
    rows = summary_rows(runs)
    if not rows:
        return
    width = max(len(r[1]) for r in rows)
    print(f"\n{'bench':<12} {'metric':<{width}} {'value':>10} unit")
    for bench, metric, value, unit in rows:
        print(f"{bench:<12} {metric:<{width}} {fmt(value):>10} {unit}")


def compare(old_path: str, new_path: str) -> None:
    """Two runs' summaries side by side."""
    old, new = (json.loads(Path(p).read_text()) for p in (old_path, new_path))
    before = {(b, m): v for b, m, v, _ in old.get("summary", [])}
    print(f"{'bench':<12} {'metric':<44} {'old':>10} {'new':>10} {'new/old':>8}")
    print(
        f"{'':<12} {'':<44} {old.get('commit', '?'):>10} {new.get('commit', '?'):>10}"
    )
    for bench, metric, value, unit in new.get("summary", []):
        was = before.get((bench, metric))
        ratio = (
            f"{value / was:8.2f}"
            if isinstance(was, int | float) and isinstance(value, int | float) and was
            else f"{'—':>8}"
        )
        shown = fmt(was) if was is not None else "—"
        print(f"{bench:<12} {metric:<44} {shown:>10} {fmt(value):>10} {ratio} {unit}")


def main() -> int:
    if len(sys.argv) == 3:
        compare(sys.argv[1], sys.argv[2])
        return 0
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="veena-bench-json-") as tmp:
        runs = {p.stem: run_one(p, Path(tmp)) for p in benchmarks()}
    print_table(runs)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started))
    out = Path(
        os.environ.get("BENCH_OUT", ROOT / "var" / "bench" / f"{stamp}-{commit()}.json")
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    combined = {
        "commit": commit(),
        "started_at": stamp,
        "cpus": os.cpu_count(),
        "summary": summary_rows(runs),
        "benchmarks": runs,
    }
    out.write_text(json.dumps(combined, indent=2))
    print(f"\nwritten: {out}")
    failed = [n for n, r in runs.items() if r["status"] not in ("ok", "skipped")]
    if failed:
        print("failed: " + ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
