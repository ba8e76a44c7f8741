// Consent
