// Pure audio helpers of the playground: G.711 μ-law decoding, WAV files, base64. Also run
// under Node (tests/accounts/playground_audio.mjs).

/** ITU-T G.711 μ-law bytes to signed 16-bit samples. */
export function decodeMulaw(bytes) {
  const out = new Int16Array(bytes.length);
  for (let i = 0; i < bytes.length; i++) {
    const u = ~bytes[i] & 0xff;
    const exponent = (u >> 4) & 0x07;
    const magnitude = (((u & 0x0f) << 3) + 0x84) << exponent;
    out[i] = u & 0x80 ? 0x84 - magnitude : magnitude - 0x84;
  }
  return out;
}

/** A complete mono 16-bit PCM WAV file of the chunks (Int16Array[]), as bytes. */
export function wavBytes(chunks, sampleRate) {
  const samples = chunks.reduce((n, c) => n + c.length, 0);
  const bytes = new Uint8Array(44 + samples * 2);
  const view = new DataView(bytes.buffer);
  const ascii = (offset, text) => {
    for (let i = 0; i < text.length; i++) bytes[offset + i] = text.charCodeAt(i);
  };
  ascii(0, "RIFF");
  view.setUint32(4, 36 + samples * 2, true);
  ascii(8, "WAVE");
  ascii(12, "fmt ");
  view.setUint32(16, 16, true);
  view.setUint16(20, 1, true); // PCM
  view.setUint16(22, 1, true); // mono
  view.setUint32(24, sampleRate, true);
  view.setUint32(28, sampleRate * 2, true);
  view.setUint16(32, 2, true);
  view.setUint16(34, 16, true);
  ascii(36, "data");
  view.setUint32(40, samples * 2, true);
  let offset = 44;
  for (const chunk of chunks) {
    for (let i = 0; i < chunk.length; i++, offset += 2) view.setInt16(offset, chunk[i], true);
  }
  return bytes;
}

/** Standard base64 of bytes (Uint8Array), as the Realtime protocol's audio field wants. */
export function base64(bytes) {
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(text);
}

/** The little-endian 16-bit samples of a binary frame (ArrayBuffer). */
export function pcm16(buffer) {
  const view = new DataView(buffer);
  const out = new Int16Array(buffer.byteLength >> 1);
  for (let i = 0; i < out.length; i++) out[i] = view.getInt16(i * 2, true);
  return out;
}
