"""Transcribe a WAV file (mono 16-bit PCM at 16, 24 or 48 kHz) with the openai SDK's realtime API.

    pip install "openai[realtime]"
    VEENA_URL=http://127.0.0.1:8000 VEENA_API_KEY=vk_live_... python transcribe_openai.py hello.wav

The GA interface (`client.realtime.connect`) needs only `base_url`: it dials ws:// for http://
and wss:// for https://. The beta interface (`client.beta.realtime.connect`) always dials wss://
unless `websocket_base_url` is given, e.g. OpenAI(websocket_base_url="ws://127.0.0.1:8000/v1").
For an https server with a private CA, set SSL_CERT_FILE=ca.pem.
"""

import base64
import os
import sys
import wave

from openai import OpenAI


def main(path: str) -> None:
    with wave.open(path) as wav:
        assert wav.getnchannels() == 1 and wav.getsampwidth() == 2, "mono PCM16 only"
        rate, pcm = wav.getframerate(), wav.readframes(wav.getnframes())
    base = os.environ.get("VEENA_URL", "http://127.0.0.1:8000")
    client = OpenAI(api_key=os.environ["VEENA_API_KEY"], base_url=base + "/v1")
    with client.realtime.connect(extra_query={"intent": "transcription"}) as conn:
        conn.session.update(
            session={
                "type": "transcription",
                "audio": {
                    "input": {
                        "format": {"type": "audio/pcm", "rate": rate},
                        "transcription": {"model": "whisper-1", "language": "en"},
                        "turn_detection": None,
                    }
                },
            }
        )
        step = rate // 10 * 2  # 100 ms of audio per append
        for i in range(0, len(pcm), step):
            conn.input_audio_buffer.append(
                audio=base64.b64encode(pcm[i : i + step]).decode()
            )
        conn.input_audio_buffer.commit()
        for event in conn:
            if event.type == "conversation.item.input_audio_transcription.completed":
                print(event.transcript)
                return
            if event.type == "error":
                sys.exit(f"error {event.error.code}: {event.error.message}")


if __name__ == "__main__":
    main(sys.argv[1])
