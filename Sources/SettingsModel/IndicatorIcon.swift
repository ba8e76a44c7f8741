// The status indicator's icons, drawn here rather than taken from the icon theme, so
// that each level looks the same, and different from the others, on every desktop: a
// grey microphone (nobody hears anything; dimmed while Earmuff is not running), an
// orange one (an app hears the microphone), a blue speaker (an app hears system audio or
// another app's audio) and a grey microphone struck through in red (microphone access
// off). Each is a few shapes measured by their distance (as signed distance fields
// are), sampled 4 × 4 times per pixel for smooth edges.

/// One drawn icon, in the StatusNotifierItem `IconPixmap` form.
public struct IndicatorPixmap: Sendable, Equatable {
    public var width: Int32
    public var height: Int32
    /// ARGB32 in network byte order, row by row.
    public var argb: [UInt8]
}

public enum IndicatorIcon {
    /// The sizes drawn; a tray scales the nearest.
    public static let sizes = [16, 22, 24, 32, 48]

    /// The icon of `level` at every size.
    public static func pixmaps(_ level: IndicatorLevel) -> [IndicatorPixmap] {
        sizes.map { draw(level, size: $0) }
    }

    /// A colour, 0–255 each.
    struct Colour {
        var r: UInt8, g: UInt8, b: UInt8, a: Double
    }

    static let grey = Colour(r: 0x8c, g: 0x8c, b: 0x8c, a: 1)
    static let orange = Colour(r: 0xff, g: 0x78, b: 0x00, a: 1)
    static let blue = Colour(r: 0x35, g: 0x84, b: 0xe4, a: 1)
    static let red = Colour(r: 0xe0, g: 0x1b, b: 0x24, a: 1)

    public static func draw(_ level: IndicatorLevel, size: Int) -> IndicatorPixmap {
        // Layers, bottom first: a shape (distance below 0 inside, in units of the icon's
        // side) and its colour; a nil colour clears what is below (the gap beside a slash).
        let layers: [((Double, Double) -> Double, Colour?)] =
            switch level {
            case .nobody: [(microphone, grey)]
            case .away: [(microphone, Colour(r: grey.r, g: grey.g, b: grey.b, a: 0.45))]
            case .microphone: [(microphone, orange)]
            case .otherAudio: [(speaker, blue)]
            case .off: [(microphone, grey), ({ slash($0, $1) - 0.06 }, nil), (slash, red)]
            }
        var argb = [UInt8](repeating: 0, count: size * size * 4)
        let n = 4
        for y in 0..<size {
            for x in 0..<size {
                // Premultiplied while compositing.
                var a = 0.0, r = 0.0, g = 0.0, b = 0.0
                for (shape, colour) in layers {
                    var covered = 0
                    for sy in 0..<n {
                        for sx in 0..<n {
                            let px = (Double(x) + (Double(sx) + 0.5) / Double(n)) / Double(size)
                            let py = (Double(y) + (Double(sy) + 0.5) / Double(n)) / Double(size)
                            if shape(px, py) <= 0 { covered += 1 }
                        }
                    }
                    let c = Double(covered) / Double(n * n)
                    guard c > 0 else { continue }
                    if let colour {
                        let ca = c * colour.a
                        r = Double(colour.r) * ca + r * (1 - ca)
                        g = Double(colour.g) * ca + g * (1 - ca)
                        b = Double(colour.b) * ca + b * (1 - ca)
                        a = ca + a * (1 - ca)
                    } else {
                        (r, g, b, a) = (r * (1 - c), g * (1 - c), b * (1 - c), a * (1 - c))
                    }
                }
                let i = (y * size + x) * 4
                if a > 0 {
                    argb[i] = UInt8((a * 255).rounded())
                    argb[i + 1] = UInt8(min(255, (r / a).rounded()))
                    argb[i + 2] = UInt8(min(255, (g / a).rounded()))
                    argb[i + 3] = UInt8(min(255, (b / a).rounded()))
                }
            }
        }
        return IndicatorPixmap(width: Int32(size), height: Int32(size), argb: argb)
    }

    // MARK: shapes, in a unit square with y downwards

    /// Distance from (x, y) to the segment from (ax, ay) to (bx, by).
    static func segment(_ x: Double, _ y: Double, _ ax: Double, _ ay: Double, _ bx: Double, _ by: Double) -> Double {
        let (dx, dy) = (bx - ax, by - ay)
        let t = max(0, min(1, ((x - ax) * dx + (y - ay) * dy) / (dx * dx + dy * dy)))
        let (ex, ey) = (x - ax - t * dx, y - ay - t * dy)
        return (ex * ex + ey * ey).squareRoot()
    }

    /// The lower half of a ring of radius `radius` around (cx, cy), `width` wide, round-ended.
    static func lowerArc(_ x: Double, _ y: Double, _ cx: Double, _ cy: Double, radius: Double, width: Double) -> Double {
        if y >= cy {
            let d = ((x - cx) * (x - cx) + (y - cy) * (y - cy)).squareRoot()
            return abs(d - radius) - width / 2
        }
        return min(segment(x, y, cx - radius, cy, cx - radius, cy), segment(x, y, cx + radius, cy, cx + radius, cy)) - width / 2
    }

    static func microphone(_ x: Double, _ y: Double) -> Double {
        let head = segment(x, y, 0.5, 0.25, 0.5, 0.42) - 0.13
        let holder = lowerArc(x, y, 0.5, 0.42, radius: 0.235, width: 0.085)
        let stem = segment(x, y, 0.5, 0.66, 0.5, 0.82) - 0.045
        let base = segment(x, y, 0.34, 0.84, 0.66, 0.84) - 0.045
        return min(head, holder, stem, base)
    }

    static func speaker(_ x: Double, _ y: Double) -> Double {
        // The box and the cone, as the inside of a convex polygon (negative inside).
        func box(_ x: Double, _ y: Double) -> Double { max(0.12 - x, x - 0.32, 0.38 - y, y - 0.62) }
        func cone(_ x: Double, _ y: Double) -> Double {
            // Edges (0.30, 0.38)–(0.52, 0.16) and (0.30, 0.62)–(0.52, 0.84), x in 0.30…0.52.
            let top = (0.38 - y) - (x - 0.30) * (0.22 / 0.22)
            let bottom = (y - 0.62) - (x - 0.30) * (0.22 / 0.22)
            return max(0.30 - x, x - 0.52, top / 1.414, bottom / 1.414)
        }
        func wave(_ radius: Double) -> Double {
            let (dx, dy) = (x - 0.5, y - 0.5)
            guard dx > 0, abs(dy) < dx * 1.1 else { return 1 }
            return abs((dx * dx + dy * dy).squareRoot() - radius) - 0.04
        }
        return min(box(x, y), cone(x, y), wave(0.2), wave(0.34))
    }

    static func slash(_ x: Double, _ y: Double) -> Double {
        segment(x, y, 0.16, 0.16, 0.84, 0.84) - 0.055
    }
}
