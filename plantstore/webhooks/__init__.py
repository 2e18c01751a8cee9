"""How changes leave the service: events written with each change, and their delivery."""
