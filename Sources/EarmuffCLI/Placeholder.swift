// EarmuffCLI
