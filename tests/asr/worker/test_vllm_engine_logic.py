"""The vLLM Whisper engine's own logic against a scripted runner (no engine process).

What the engine sends (decoder prompt ids, window audio, priority, sampling rules) and how it
assembles the answers: windows past 30 s, prompt and prefix on the first window only, language
detection for multilingual checkpoints. The real engine runs in test_vllm_stack.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from asr.whisper import MODEL_RATE
from asr.worker.engines.base import AsrDecodeRequest
from asr.worker.engines.whisper_tokens import WhisperVocab
from tests.asr.worker.test_whisper_tokens import tiny_vocab

pytestmark = pytest.mark.vllm  # SamplingParams comes from vLLM


@dataclass
class Request:
    ids: list[int]
    seconds: float
    params: Any
    priority: int
    kind: str


class ScriptedRunner:
    """Stands in for ``VllmRunner``: records each request, answers token ids from a script."""

    def __init__(self, vocab: WhisperVocab, answers: list[list[int]]) -> None:
        self.vocab = vocab
        self.answers = list(answers)
        self.requests: list[Request] = []
        self.hold: dict[
            str, asyncio.Event
        ] = {}  # requests of a kind wait for their event
        renderer = SimpleNamespace(render_cmpl_async=self.render)
        self.engine = SimpleNamespace(
            model_config=SimpleNamespace(is_encoder_decoder=True), renderer=renderer
        )

    async def render(self, prompts: list[Any]) -> list[dict[str, Any]]:
        prompt = prompts[0]
        audio, rate = prompt["encoder_prompt"]["multi_modal_data"]["audio"]
        ids = prompt["decoder_prompt"]["prompt_token_ids"]
        if ids[0] != self.vocab.sot:  # what vLLM does to such a decoder prompt
            ids = [self.vocab.sot, *ids]
        return [
            {
                "type": "enc_dec",
                "seconds": len(audio) / rate,
                "decoder_prompt": {"prompt_token_ids": ids},
            }
        ]

    async def complete(
        self, prompt: dict[str, Any], params: Any, *, priority: int, kind: str
    ) -> Any:
        ids = prompt["decoder_prompt"]["prompt_token_ids"]
        self.requests.append(Request(ids, prompt["seconds"], params, priority, kind))
        if kind in self.hold:
            await self.hold[kind].wait()
        output = SimpleNamespace(token_ids=self.answers.pop(0), logprobs=None)
        return SimpleNamespace(outputs=[output], finished=True)


@pytest.fixture(scope="module")
def vocab(tmp_path_factory: pytest.TempPathFactory) -> WhisperVocab:
    return tiny_vocab(tmp_path_factory.mktemp("tiny"))


def engine(vocab: WhisperVocab, answers: list[list[int]]) -> Any:
    from asr.worker.engines.vllm import VllmWhisperAsr

    return VllmWhisperAsr(ScriptedRunner(vocab, answers), vocab, "vllm/test.en")  # type: ignore[arg-type]


def ts(vocab: WhisperVocab, seconds: float) -> int:
    return vocab.timestamp_begin + round(seconds / 0.02)


def audio(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * MODEL_RATE), dtype=np.float32)


async def test_asr_vllm_long_audio_resumes_after_the_last_complete_segment(
    vocab: WhisperVocab,
) -> None:
    e = vocab.encode
    answers = [
        [*e(" Hello world."), ts(vocab, 2.0), ts(vocab, 2.0), *e(" This is")],
        [*e(" This is a test."), ts(vocab, 29.0), vocab.eot],
        [*e(" The end."), vocab.eot],
    ]
    asr = engine(vocab, answers)
    req = AsrDecodeRequest(audio=audio(35), prompt="Django", prefix="Hello")
    hyp = await asr.decode(req)
    assert hyp.text == "Hello Hello world. This is a test. The end."
    first, second, third = asr.runner.requests
    # The prompt and the forced prefix belong to the first window only, exactly as built:
    # the renderer's extra <|startoftranscript|> in front of <|startofprev|> is gone.
    assert first.ids == [
        vocab.sop,
        *e(" Django"),
        vocab.sot,
        vocab.timestamp_begin,
        *e(" Hello"),
    ]
    # Window 2 starts at 2.0 s, window 3 at 2.0 + 29.0 s.
    assert (first.seconds, second.seconds, third.seconds) == (30.0, 30.0, 4.0)
    assert second.ids == [vocab.sot, vocab.timestamp_begin]  # resumed at 2.0 s
    assert third.ids == [vocab.sot, vocab.no_timestamps]  # last window, no times wanted
    assert hyp.prompt_tokens == len(first.ids)
    assert hyp.completion_tokens == sum(len(e(t)) for t in answers_text())
    assert {r.priority for r in asr.runner.requests} == {0}
    rules = first.params.extra_args["whisper"]
    assert (
        rules["timestamps"] is True and rules["sample_begin"] == len(e(" Django")) + 2
    )
    assert third.params.extra_args["whisper"]["timestamps"] is False


def answers_text() -> list[str]:
    return [" Hello world.", " This is", " This is a test.", " The end."]


async def test_asr_vllm_chunk_decodes_run_at_background_priority(
    vocab: WhisperVocab,
) -> None:
    asr = engine(vocab, [[*vocab.encode(" Hi."), vocab.eot]])
    hyp = await asr.decode(AsrDecodeRequest(audio=audio(2), background=True))
    assert hyp.text == "Hi."
    (request,) = asr.runner.requests
    assert (request.priority, request.kind) == (1, "asr-chunk")
    assert request.ids == [vocab.sot, vocab.no_timestamps]


async def test_asr_vllm_words_are_timed_at_segment_ends(vocab: WhisperVocab) -> None:
    e = vocab.encode
    answer = [*e(" One two."), ts(vocab, 1.0), ts(vocab, 1.2), *e(" Three"), vocab.eot]
    asr = engine(vocab, [answer])
    hyp = await asr.decode(
        AsrDecodeRequest(audio=audio(3), word_timestamps=True, logprobs=True)
    )
    assert [(w.text, w.end) for w in hyp.words] == [
        ("One", None),
        (" two.", 1.0),
        (" Three", None),
    ]
    assert asr.runner.requests[0].params.logprobs == 0


async def test_asr_vllm_logprobs_only_when_the_client_asks(vocab: WhisperVocab) -> None:
    asr = engine(vocab, [[*vocab.encode(" Hi."), ts(vocab, 1.0), vocab.eot]])
    hyp = await asr.decode(AsrDecodeRequest(audio=audio(2), word_timestamps=True))
    assert [(w.text, w.end) for w in hyp.words] == [("Hi.", 1.0)]  # times without them
    assert asr.runner.requests[0].params.logprobs is None


async def test_asr_se14_multilingual_detects_the_language_first(
    vocab: WhisperVocab,
) -> None:
    multi = dataclasses.replace(
        vocab, multilingual=True, languages={"en": 50259, "de": 50261}
    )
    asr = engine(multi, [[50261], [*vocab.encode(" Hallo."), vocab.eot]])
    hyp = await asr.decode(AsrDecodeRequest(audio=audio(2), language=None))
    assert hyp.text == "Hallo."
    detect, transcribe = asr.runner.requests
    assert detect.ids == [vocab.sot] and detect.kind == "asr-lang"
    assert sorted(detect.params.allowed_token_ids) == [50259, 50261]
    assert transcribe.ids == [vocab.sot, 50261, vocab.transcribe, vocab.no_timestamps]


def test_the_model_version_marks_english_only_checkpoints(
    vocab: WhisperVocab, tmp_path: Path
) -> None:
    from asr.worker.engines.vllm_config import served_version

    assert served_version(tmp_path / "tiny", vocab) == "vllm/tiny.en"
    assert served_version(tmp_path / "whisper-tiny.en", vocab) == "vllm/whisper-tiny.en"
    multi = dataclasses.replace(vocab, multilingual=True)
    assert served_version(tmp_path / "large-v3", multi) == "vllm/large-v3"


async def test_asr_wk6_chunk_decodes_wait_while_a_final_runs(
    vocab: WhisperVocab,
) -> None:
    hi = [*vocab.encode(" Hi."), vocab.eot]
    asr = engine(vocab, [hi, hi])
    asr.runner.hold["asr-final"] = release = asyncio.Event()
    final = asyncio.create_task(asr.decode(AsrDecodeRequest(audio=audio(2))))
    await asyncio.sleep(0.01)
    chunk = asyncio.create_task(
        asr.decode(AsrDecodeRequest(audio=audio(2), background=True))
    )
    await asyncio.sleep(0.1)
    assert [r.kind for r in asr.runner.requests] == ["asr-final"]  # the chunk waits
    release.set()
    await asyncio.gather(final, chunk)
    assert [r.kind for r in asr.runner.requests] == ["asr-final", "asr-chunk"]


async def test_asr_wk6_a_chunk_decode_waits_one_chunk_period_at_most(
    vocab: WhisperVocab,
) -> None:
    hi = [*vocab.encode(" Hi."), vocab.eot]
    asr = engine(vocab, [hi, hi])
    asr.finals_first.hold_s = 0.05
    asr.runner.hold["asr-final"] = release = asyncio.Event()
    final = asyncio.create_task(asr.decode(AsrDecodeRequest(audio=audio(2))))
    await asyncio.sleep(0.01)
    await asr.decode(AsrDecodeRequest(audio=audio(2), background=True))
    assert not final.done()  # the chunk went ahead of a final that did not end
    release.set()
    await final
