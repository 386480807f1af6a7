"""Text to a WAV file over /v1/tts/ws with the `websockets` package (pip install websockets).

    VEENA_URL=http://127.0.0.1:8000 VEENA_API_KEY=vk_live_... python tts_websockets.py "Hello." hello.wav

For an https server with a private CA, set SSL_CERT_FILE=ca.pem.
"""

import asyncio
import json
import os
import sys
import wave

from websockets.asyncio.client import connect


async def main(text: str, path: str) -> None:
    base = os.environ.get("VEENA_URL", "http://127.0.0.1:8000")
    url = base.replace("http", "ws", 1) + "/v1/tts/ws"
    headers = {"Authorization": f"Bearer {os.environ['VEENA_API_KEY']}"}
    audio = bytearray()
    async with connect(url, additional_headers=headers) as ws:
        # "pcm": raw 16-bit samples, no streaming WAV header frame to strip.
        await ws.send(json.dumps({"text": text, "format": "pcm", "sample_rate": 24000}))
        async for message in ws:
            if isinstance(message, bytes):
                audio += message
                continue
            event = json.loads(message)
            if event["event"] == "error":
                sys.exit(f"error {event['error']['code']}: {event['error']['message']}")
            if event["event"] == "complete":
                print(json.dumps(event["metrics"]))
                break
    with wave.open(path, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(24000)
        out.writeframes(bytes(audio))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
