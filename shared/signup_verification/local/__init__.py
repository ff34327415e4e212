"""Local emulation: embedded database, function servers, scheduler emulation and the mailbox."""
