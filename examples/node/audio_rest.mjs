// Speech and transcription over the OpenAI-compatible REST endpoints with the openai npm SDK
// (Node >= 20): POST /v1/audio/speech, then POST /v1/audio/transcriptions on the file it wrote,
// once whole and once streamed (stream: true).
//
//   npm ci
//   VEENA_URL=http://127.0.0.1:8000 VEENA_API_KEY=vk_live_... node audio_rest.mjs hello.mp3 "Hello there."
import { createReadStream } from "node:fs";
import { writeFile } from "node:fs/promises";
import OpenAI from "openai";

const [out = "speech.mp3", text = "Hello from veena."] = process.argv.slice(2);
const client = new OpenAI({
  apiKey: process.env.VEENA_API_KEY,
  baseURL: (process.env.VEENA_URL ?? "http://127.0.0.1:8000") + "/v1",
  maxRetries: 0,
});

const speech = await client.audio.speech.create({
  model: "tts-1",
  voice: "alloy",
  input: text,
  response_format: "mp3",
});
const audio = Buffer.from(await speech.arrayBuffer());
await writeFile(out, audio);
console.log(`speech: ${out} (${audio.length} bytes)`);

const whole = await client.audio.transcriptions.create({
  model: "whisper-1",
  file: createReadStream(out),
});
console.log(`text: ${whole.text}`);

const stream = await client.audio.transcriptions.create({
  model: "whisper-1",
  file: createReadStream(out),
  stream: true,
});
let joined = "";
for await (const event of stream) {
  if (event.type === "transcript.text.delta") joined += event.delta;
  if (event.type === "transcript.text.done" && event.text !== joined)
    throw new Error("deltas do not join to the final text");
}
console.log(`stream: ${joined}`);
