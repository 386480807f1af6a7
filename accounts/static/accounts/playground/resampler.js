// A streaming resampler for the microphone worklet: windowed-sinc interpolation whose filter
// state and phase carry across calls, so any chunking of the input gives the same output (no
// clicks at block boundaries, no drift in the sample count). Pure: also runs under Node.

const HALF_TAPS = 16; // input samples on each side of an output sample
const ROLL_OFF = 0.92; // cutoff as a share of the lower Nyquist frequency

function sinc(x) {
  if (x === 0) return 1;
  const px = Math.PI * x;
  return Math.sin(px) / px;
}

export class Resampler {
  constructor(inputRate, outputRate) {
    this.step = inputRate / outputRate; // input samples per output sample
    this.same = inputRate === outputRate;
    // Cutoff in cycles per input sample, below both rates' Nyquist frequencies.
    this.cutoff = 0.5 * Math.min(1, outputRate / inputRate) * ROLL_OFF;
    // History starts with HALF_TAPS zeros, so the first output sits on the first input.
    this.history = new Float32Array(HALF_TAPS);
    this.position = HALF_TAPS;
  }

  /** Resample the next block of input (Float32Array); returns the output it completes. */
  process(input) {
    if (this.same) return Float32Array.from(input);
    const data = new Float32Array(this.history.length + input.length);
    data.set(this.history);
    data.set(input, this.history.length);
    const out = [];
    let position = this.position;
    while (Math.floor(position) + HALF_TAPS < data.length) {
      out.push(this.sampleAt(data, position));
      position += this.step;
    }
    const keep = Math.max(0, Math.floor(position) - HALF_TAPS + 1);
    this.history = data.slice(keep);
    this.position = position - keep;
    return Float32Array.from(out);
  }

  /** The output still held back by the filter's look-ahead (call once, at the end). */
  flush() {
    return this.same ? new Float32Array(0) : this.process(new Float32Array(HALF_TAPS));
  }

  sampleAt(data, position) {
    const base = Math.floor(position);
    const frac = position - base;
    const fc2 = 2 * this.cutoff;
    let sum = 0;
    let weights = 0;
    for (let j = 1 - HALF_TAPS; j <= HALF_TAPS; j++) {
      const x = j - frac;
      const window = 0.5 * (1 + Math.cos((Math.PI * x) / HALF_TAPS));
      const w = fc2 * sinc(fc2 * x) * window;
      sum += data[base + j] * w;
      weights += w;
    }
    return sum / weights; // unity gain at DC for every phase
  }
}

/** Float samples in [-1, 1] to signed 16-bit, clipped and rounded. */
export function toPcm16(samples) {
  const out = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i++) {
    const s = Math.max(-1, Math.min(1, samples[i]));
    out[i] = Math.round(s * 32767);
  }
  return out;
}
