// Proxy
