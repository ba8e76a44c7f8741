// ControlProtocol
