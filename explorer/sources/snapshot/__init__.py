"""EDGE: the offline snapshot shipped in data/: reading it and building it."""
