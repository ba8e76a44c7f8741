// PulseWire
