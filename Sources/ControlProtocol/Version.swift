// The release of this build: one string for `earmuff --version`, the control
// greeting and `status`.

/// The release of this build, e.g. "0.1.0".
public let earmuffVersion = "0.1.0"
