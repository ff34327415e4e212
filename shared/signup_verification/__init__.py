"""Signup verification delivery: the domain library behind the Cloud Functions in functions/."""
