import Foundation

/// Raw PCM sample formats the tests record or generate (a test-side mirror of
/// PulseAudio's names; independent of PulseWire so the analysis cannot share
/// a bug with the code under test).
public enum PCMFormat: String, Sendable, CaseIterable {
    case u8, alaw, ulaw, s16le, s24le, s32le, float32le

    /// The name parecord/pacat take in `--format=`.
    public var pulseName: String { rawValue }

    /// Bytes per sample (one channel).
    public var bytesPerSample: Int {
        switch self {
        case .u8, .alaw, .ulaw: return 1
        case .s16le: return 2
        case .s24le: return 3
        case .s32le, .float32le: return 4
        }
    }

    /// The byte that fills silence of this format (PulseAudio's silence pattern).
    public var silenceByte: UInt8 {
        switch self {
        case .u8: return 0x80
        case .alaw: return 0xD5
        case .ulaw: return 0xFF
        case .s16le, .s24le, .s32le, .float32le: return 0x00
        }
    }
}

/// Decoding and measuring recorded audio: assertions are on content (exact
/// silence, or a sine's share of the energy), never on timing.
public enum AudioAnalysis {
    /// Decodes interleaved samples to Doubles in [-1, 1]. A trailing partial
    /// sample is ignored.
    public static func decode(_ bytes: Data, format: PCMFormat) -> [Double] {
        let width = format.bytesPerSample
        let count = bytes.count / width
        var out = [Double]()
        out.reserveCapacity(count)
        unsafe bytes.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
            for i in 0..<count {
                let o = i * width
                switch format {
                case .u8:
                    unsafe out.append((Double(raw[o]) - 128) / 128)
                case .alaw:
                    unsafe out.append(Double(alawToLinear(raw[o])) / 32768)
                case .ulaw:
                    unsafe out.append(Double(ulawToLinear(raw[o])) / 32768)
                case .s16le:
                    let v = unsafe Int16(bitPattern: UInt16(raw[o]) | UInt16(raw[o + 1]) << 8)
                    out.append(Double(v) / 32768)
                case .s24le:
                    let u = unsafe UInt32(raw[o]) << 8 | UInt32(raw[o + 1]) << 16 | UInt32(raw[o + 2]) << 24
                    out.append(Double(Int32(bitPattern: u) >> 8) / 8_388_608)
                case .s32le:
                    let u = unsafe UInt32(raw[o]) | UInt32(raw[o + 1]) << 8 | UInt32(raw[o + 2]) << 16 | UInt32(raw[o + 3]) << 24
                    out.append(Double(Int32(bitPattern: u)) / 2_147_483_648)
                case .float32le:
                    let u = unsafe UInt32(raw[o]) | UInt32(raw[o + 1]) << 8 | UInt32(raw[o + 2]) << 16 | UInt32(raw[o + 3]) << 24
                    out.append(Double(Float(bitPattern: u)))
                }
            }
        }
        return out
    }

    /// Takes every `channels`-th sample starting at `channel` (de-interleaves one channel).
    public static func channel(_ samples: [Double], _ channel: Int, of channels: Int) -> [Double] {
        guard channels > 1 else { return samples }
        return stride(from: channel, to: samples.count, by: channels).map { samples[$0] }
    }

    /// Root mean square (0 for no samples).
    public static func rms(_ samples: [Double]) -> Double {
        guard !samples.isEmpty else { return 0 }
        return (samples.reduce(0) { $0 + $1 * $1 } / Double(samples.count)).squareRoot()
    }

    /// The share of the signal's energy at `frequency` (Goertzel at that exact
    /// frequency, normalised so a pure sine gives ≈1 and noise or silence ≈0).
    public static func toneRatio(_ samples: [Double], frequency: Double, sampleRate: Double) -> Double {
        let energy = samples.reduce(0) { $0 + $1 * $1 }
        guard energy > 0, samples.count > 1 else { return 0 }
        let power = goertzelPower(samples, frequency: frequency, sampleRate: sampleRate)
        return min(1.5, 2 * power / (Double(samples.count) * energy))
    }

    /// `toneRatio` of consecutive blocks of `blockSize` samples, skipping blocks
    /// whose RMS is below `minimumRMS` (silence before or after a tone; with the
    /// default 0 a silent block counts, as ratio 0). Block-wise
    /// analysis keeps one phase jump (a dropped fragment) from cancelling the
    /// whole measurement.
    public static func blockToneRatios(
        _ samples: [Double], frequency: Double, sampleRate: Double, blockSize: Int, minimumRMS: Double = 0
    ) -> [Double] {
        guard blockSize > 0 else { return [] }
        var ratios: [Double] = []
        var start = 0
        while start + blockSize <= samples.count {
            let block = Array(samples[start..<(start + blockSize)])
            if rms(block) >= minimumRMS {
                ratios.append(toneRatio(block, frequency: frequency, sampleRate: sampleRate))
            }
            start += blockSize
        }
        return ratios
    }

    /// The median of `values` (0 for none).
    public static func median(_ values: [Double]) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        let mid = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
    }

    /// Squared magnitude of the DFT of `samples` at `frequency` (Goertzel).
    public static func goertzelPower(_ samples: [Double], frequency: Double, sampleRate: Double) -> Double {
        let w = 2 * Double.pi * frequency / sampleRate
        let coeff = 2 * cos(w)
        var s1 = 0.0, s2 = 0.0
        for x in samples {
            let s0 = x + coeff * s1 - s2
            s2 = s1
            s1 = s0
        }
        return s1 * s1 + s2 * s2 - coeff * s1 * s2
    }

    /// Whether every byte of `bytes` equals `value` (exact silence checks). False for empty data.
    public static func isUniform(_ bytes: Data, value: UInt8) -> Bool {
        !bytes.isEmpty && bytes.allSatisfy { $0 == value }
    }

    /// ITU-T G.711 A-law to 16-bit linear.
    public static func alawToLinear(_ byte: UInt8) -> Int16 {
        let a = byte ^ 0x55
        let exponent = Int((a & 0x70) >> 4)
        var magnitude = Int(a & 0x0F) << 4
        switch exponent {
        case 0: magnitude += 8
        case 1: magnitude += 0x108
        default: magnitude = (magnitude + 0x108) << (exponent - 1)
        }
        return Int16(a & 0x80 != 0 ? magnitude : -magnitude)
    }

    /// ITU-T G.711 µ-law to 16-bit linear.
    public static func ulawToLinear(_ byte: UInt8) -> Int16 {
        let u = ~byte
        let exponent = Int((u & 0x70) >> 4)
        let magnitude = ((Int(u & 0x0F) << 3) + 0x84) << exponent
        return Int16(u & 0x80 != 0 ? 0x84 - magnitude : magnitude - 0x84)
    }

    /// A 16-bit PCM WAV file holding a sine of `frequency` Hz at `amplitude` (0…1)
    /// on every channel.
    public static func sineWAV(
        frequency: Double, seconds: Double, sampleRate: Int = 44100, channels: Int = 2, amplitude: Double = 0.5
    ) -> Data {
        let frames = Int(seconds * Double(sampleRate))
        var pcm = Data(capacity: frames * channels * 2)
        for i in 0..<frames {
            let v = Int16((amplitude * 32767 * sin(2 * Double.pi * frequency * Double(i) / Double(sampleRate))).rounded())
            for _ in 0..<channels {
                pcm.append(UInt8(truncatingIfNeeded: v))
                pcm.append(UInt8(truncatingIfNeeded: v >> 8))
            }
        }
        var wav = Data()
        func u32(_ v: Int) { unsafe withUnsafeBytes(of: UInt32(v).littleEndian) { unsafe wav.append(contentsOf: $0) } }
        func u16(_ v: Int) { unsafe withUnsafeBytes(of: UInt16(v).littleEndian) { unsafe wav.append(contentsOf: $0) } }
        wav.append(contentsOf: Array("RIFF".utf8)); u32(36 + pcm.count)
        wav.append(contentsOf: Array("WAVE".utf8))
        wav.append(contentsOf: Array("fmt ".utf8)); u32(16); u16(1); u16(channels)
        u32(sampleRate); u32(sampleRate * channels * 2); u16(channels * 2); u16(16)
        wav.append(contentsOf: Array("data".utf8)); u32(pcm.count)
        wav.append(pcm)
        return wav
    }
}
