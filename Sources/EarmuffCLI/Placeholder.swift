public enum EarmuffMain {
    public static func run() {}
}
