import EarmuffCLI

EarmuffMain.run()
