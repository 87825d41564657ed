"""EDGE: where models come from: what the user typed, local files, the Hub, the cache, the snapshot."""
