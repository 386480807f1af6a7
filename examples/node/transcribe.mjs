// Transcribe a WAV file (mono 16-bit PCM, 16/24/48 kHz) with the openai npm SDK's realtime
// client for Node (OpenAIRealtimeWS, on the `ws` package; Node >= 20).
//
//   npm ci
//   VEENA_URL=https://127.0.0.1:8443 VEENA_API_KEY=vk_live_... node transcribe.mjs hello.wav
//
// The SDK always dials wss:// (buildRealtimeURL sets url.protocol = 'wss'), so the gateway must
// serve TLS itself (TLS_CERT_FILE / TLS_KEY_FILE) or sit behind a TLS proxy. For a private CA,
// set NODE_EXTRA_CA_CERTS=ca.pem.
import { readFileSync } from "node:fs";
import OpenAI from "openai";
import { OpenAIRealtimeWS } from "openai/realtime/ws";

function readWav(path) {
  const buf = readFileSync(path);
  let rate = 0;
  for (let at = 12; at + 8 <= buf.length; ) {
    const id = buf.toString("ascii", at, at + 4);
    const size = buf.readUInt32LE(at + 4);
    if (id === "fmt ") {
      if (buf.readUInt16LE(at + 10) !== 1 || buf.readUInt16LE(at + 22) !== 16)
        throw new Error("mono 16-bit PCM only");
      rate = buf.readUInt32LE(at + 12);
    } else if (id === "data") {
      const end = size === 0xffffffff ? buf.length : at + 8 + size; // streaming header
      return { rate, pcm: buf.subarray(at + 8, end) };
    }
    at += 8 + size + (size % 2);
  }
  throw new Error("no data chunk");
}

const { rate, pcm } = readWav(process.argv[2]);
const client = new OpenAI({
  apiKey: process.env.VEENA_API_KEY,
  baseURL: (process.env.VEENA_URL ?? "https://127.0.0.1:8443") + "/v1",
});
const rt = new OpenAIRealtimeWS({ model: "whisper-1" }, client);

rt.on("error", (err) => {
  console.error(`error ${err.error?.code ?? ""}: ${err.message}`);
  process.exit(1);
});
rt.socket.on("open", () => {
  rt.send({
    type: "session.update",
    session: {
      type: "transcription",
      audio: {
        input: {
          format: { type: "audio/pcm", rate },
          transcription: { model: "whisper-1", language: "en" },
          turn_detection: null,
        },
      },
    },
  });
  const step = (rate / 10) * 2; // 100 ms of audio per append
  for (let i = 0; i < pcm.length; i += step) {
    rt.send({ type: "input_audio_buffer.append", audio: pcm.subarray(i, i + step).toString("base64") });
  }
  rt.send({ type: "input_audio_buffer.commit" });
});
rt.on("conversation.item.input_audio_transcription.delta", (e) => process.stderr.write(e.delta));
rt.on("conversation.item.input_audio_transcription.completed", (e) => {
  process.stderr.write("\n");
  console.log(e.transcript);
  rt.close();
});
