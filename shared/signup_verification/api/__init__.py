"""The HTTP edge: request reading, models, problems, caller identity and pages."""
