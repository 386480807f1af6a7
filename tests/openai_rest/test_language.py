"""``verbose_json``'s language on the real engines, from a gateway whose model may be asked
for no language (a multilingual name): the response names the language faster-whisper
decoded in, not the request's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.openai_rest.conftest import RestGateway, started_gateway

pytestmark = pytest.mark.slow

TEXT = "Good morning. The weather is fine and the train leaves at nine."


@pytest.fixture(scope="module")
def multilingual_gateway(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RestGateway]:
    data = tmp_path_factory.mktemp("openai-rest-multilingual")
    with started_gateway(data, ASR_MODEL="whisper-tiny") as gw:
        yield gw


def test_verbose_json_names_the_language_the_engine_detected(
    multilingual_gateway: RestGateway,
) -> None:
    client = multilingual_gateway.client()
    wav = client.audio.speech.create(
        model="tts-1", voice="alloy", input=TEXT, response_format="wav"
    ).content
    detected = client.audio.transcriptions.create(
        model="whisper-1", file=("a.wav", wav), response_format="verbose_json"
    )
    assert detected.language == "english"  # no language asked for: Whisper's own
    assert "weather" in detected.text.lower()
    named = client.audio.transcriptions.create(
        model="whisper-1",
        file=("a.wav", wav),
        response_format="verbose_json",
        language="en",
    )
    assert named.language == "english"
    # The bundled checkpoint is English-only whatever the served name says: it decodes
    # a request for German in English, and the response says what was decoded.
    other = client.audio.transcriptions.create(
        model="whisper-1",
        file=("a.wav", wav),
        response_format="verbose_json",
        language="de",
    )
    assert other.language == "english"
