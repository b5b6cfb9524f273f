"""The config: dataclass defaults <- YAML <- key=value, every value checked before any data is read."""
