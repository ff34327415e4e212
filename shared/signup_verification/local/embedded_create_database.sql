-- CREATE DATABASE takes no bind parameters: embedded.py fills a double-quoted identifier.
CREATE DATABASE {name}
