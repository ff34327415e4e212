"""Local servers that speak the providers' real protocols, for tests and local runs:
aiosmtpd for SMTP, small HTTP servers answering as SendGrid's v3 mail send and Twilio's Messages
API do (slow answers, resets after accepting, 429 with Retry-After, 5xx), and fast seeding."""
