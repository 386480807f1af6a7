// Runs the playground's pure audio modules under Node and prints what they compute as JSON;
// tests/accounts/test_playground_audio.py checks it.
import { base64, decodeMulaw, wavBytes } from "../../accounts/static/accounts/playground/audio.js";
import { Resampler, toPcm16 } from "../../accounts/static/accounts/playground/resampler.js";

function tone(rate, hz, seconds, amplitude = 0.5) {
  const out = new Float32Array(Math.round(rate * seconds));
  for (let i = 0; i < out.length; i++) out[i] = amplitude * Math.sin((2 * Math.PI * hz * i) / rate);
  return out;
}

function resampleInChunks(inRate, outRate, input, sizes) {
  const resampler = new Resampler(inRate, outRate);
  const parts = [];
  let at = 0;
  for (let k = 0; at < input.length; k++) {
    const size = sizes[k % sizes.length];
    parts.push(resampler.process(input.subarray(at, at + size)));
    at += size;
  }
  parts.push(resampler.flush());
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}

function rms(values) {
  return Math.sqrt(values.reduce((s, v) => s + v * v, 0) / values.length);
}

const resampling = [];
for (const [inRate, outRate] of [[48000, 24000], [44100, 24000], [16000, 24000], [24000, 24000]]) {
  const input = tone(inRate, 1000, 1);
  const whole = resampleInChunks(inRate, outRate, input, [input.length]);
  const chunked = resampleInChunks(inRate, outRate, input, [128, 1, 333, 7, 4096]);
  const ideal = tone(outRate, 1000, whole.length / outRate);
  const middle = (a) => a.subarray(100, a.length - 100);
  const error = middle(whole).map((v, i) => v - middle(ideal)[i]);
  const alias = inRate > outRate ? resampleInChunks(inRate, outRate, tone(inRate, 0.4 * inRate, 1), [128]) : null;
  resampling.push({
    inRate,
    outRate,
    inputSamples: input.length,
    outputSamples: whole.length,
    chunkedSamples: chunked.length,
    chunkingDiff: Math.max(...whole.map((v, i) => Math.abs(v - chunked[i]))),
    toneError: rms(error),
    aliasRms: alias ? rms(middle(alias)) : null,
  });
}

const every = new Uint8Array(256).map((_, i) => i);
console.log(
  JSON.stringify({
    resampling,
    pcm16: Array.from(toPcm16([-2, -1, -0.5, 0, 0.5, 1, 2])),
    mulaw: Array.from(decodeMulaw(every)),
    wav: base64(wavBytes([Int16Array.of(1, -2), Int16Array.of(32767, -32768)], 16000)),
    base64: base64(every),
  }),
);
