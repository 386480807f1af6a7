// The unmodified openai npm SDK (examples/node) with a realtime client secret (issue 35):
// mint one with the API key (client.realtime.clientSecrets.create), transcribe a WAV with a
// client that holds only the secret (OpenAIRealtimeWS), check that REST refuses the secret,
// that a secret of a revoked key (VEENA_REVOKED_SECRET) is refused, and that the minted one is
// refused once it has expired. Prints one JSON object.
//
//   node realtime_secret.mjs speech.wav   (VEENA_URL, VEENA_API_KEY, VEENA_REVOKED_SECRET)
import { readFileSync } from "node:fs";
import OpenAI from "../../examples/node/node_modules/openai/index.mjs";
import { OpenAIRealtimeWS } from "../../examples/node/node_modules/openai/realtime/ws.mjs";

const TTL_S = 10;
const baseURL = `${process.env.VEENA_URL}/v1`;

function wavPcm(path) {
  const buf = readFileSync(path); // the examples' 44-byte header WAV
  return { rate: buf.readUInt32LE(24), pcm: buf.subarray(44) };
}

/** The events of one realtime connection holding `secret`, until a transcript or an error. */
function session(secret, pcm) {
  const client = new OpenAI({ apiKey: secret, baseURL, maxRetries: 0 });
  const rt = new OpenAIRealtimeWS({ model: "whisper-1" }, client);
  const events = [];
  return new Promise((resolve) => {
    const finish = () => {
      rt.close();
      resolve(events);
    };
    rt.on("error", (err) => {
      events.push({ type: "error", code: err.error?.code ?? null });
      finish();
    });
    rt.on("session.created", (event) => {
      events.push({ type: event.type, input: event.session.audio.input });
      if (!pcm) return finish();
      for (let i = 0; i < pcm.length; i += 4800) {
        rt.send({ type: "input_audio_buffer.append", audio: pcm.subarray(i, i + 4800).toString("base64") });
      }
      rt.send({ type: "input_audio_buffer.commit" });
    });
    rt.on("conversation.item.input_audio_transcription.completed", (event) => {
      events.push({ type: event.type, transcript: event.transcript });
      finish();
    });
    rt.socket.on("close", () => resolve(events));
  });
}

const { rate, pcm } = wavPcm(process.argv[2]);
const server = new OpenAI({ apiKey: process.env.VEENA_API_KEY, baseURL, maxRetries: 0 });
const secret = await server.realtime.clientSecrets.create({
  expires_after: { anchor: "created_at", seconds: TTL_S },
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
const used = await session(secret.value, pcm);

let rest = null;
try {
  await new OpenAI({ apiKey: secret.value, baseURL, maxRetries: 0 }).models.list();
} catch (error) {
  rest = error.status ?? String(error);
}
const revoked = await session(process.env.VEENA_REVOKED_SECRET);
await new Promise((ok) => setTimeout(ok, Math.max(0, secret.expires_at * 1000 + 1000 - Date.now())));
const expired = await session(secret.value);
console.log(JSON.stringify({ value: secret.value.slice(0, 3), session: secret.session, used, rest, revoked, expired }));
process.exit(0);
